"""`bench.serving.tasks`' models, built once in a worker of their own (TensorFlow side).

For each task, in ``--workdir/<task>/``: the fine-tuned checkpoint recovered from the
shipped export (`albert_tf.serving.recovery.recover_checkpoint`; the repository holds
the exports, not the checkpoints), for tagging a dense-head tagger tuned briefly on its
encoder (`dense_tagger`), that model in Hugging Face's layout (``convert --target=hf``,
the peers' weights) and its SavedModel in every precision the run measures. The ONNX
side is `bench.serving.tasks.peers.prepare_onnx`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import time
from typing import Any

from bench.common import dir_bytes
from bench.serving.tasks.workload import (
    PRETRAINED,
    SAVEDMODELS,
    SHIPPED,
    TASKS,
    TaskBench,
    hf_dir,
    task_dir,
)
from bench.serving.workdir import PREPARED

#: Names, places and organisations of the dense tagger's synthetic training text.
_PER = ("李鹏", "江泽民", "钱其琛", "朱镕基", "王伟", "张明", "刘晓红", "陈建国", "徐匡迪")
_LOC = ("北京", "上海", "广州", "香港", "日本", "浦东新区", "广东省", "天津", "美国")
_ORG = ("国务院", "外交部", "上海市人民政府", "中山大学", "新华社", "中国银行", "全国人大常委会")
_TEMPLATES = (
    "{PER}今天在{LOC}会见了{ORG}代表团。",
    "{ORG}负责人{PER}说，{LOC}的经济发展很快。",
    "据{ORG}消息，{PER}将于下月访问{LOC}。",
    "{LOC}市民{PER}向{ORG}捐款一万元。",
    "记者从{ORG}获悉，{LOC}今年的粮食产量创历史新高，{PER}对此表示满意。",
)


def synthetic_tagging_items(count: int) -> list[dict[str, Any]]:
    """``count`` labelled sentences in the package's tagging format, from templates."""
    rows = []
    for i in range(count):
        template = _TEMPLATES[i % len(_TEMPLATES)]
        names = {"PER": _PER[i % len(_PER)], "LOC": _LOC[(i // 2) % len(_LOC)]}
        names["ORG"] = _ORG[(i // 3) % len(_ORG)]
        text, entities, rest = "", [], template
        while "{" in rest:
            before, _, after = rest.partition("{")
            label, _, rest = after.partition("}")
            text += before
            entities.append(
                {"start": len(text), "end": len(text) + len(names[label]), "label": label}
            )
            text += names[label]
        rows.append(
            {"id": f"synthetic-{i}", "lang": "zh", "text": text + rest, "entities": entities}
        )
    return rows


def tagger_encoder(shipped: str, out_dir: str, fields: dict[str, Any]) -> str:
    """A dense-head tagger with the shipped tagger's encoder weights and a fresh head,
    written as a model directory; returns it.

    `recover_checkpoint` cannot rebuild the shipped tagger itself: its BiLSTM's two
    directions export variables of the same names. The encoder's are unique, so this
    is recovery (the same helpers) with the head left out.
    """
    from albert_tf.checkpoints.saved_format import (
        SETTINGS_FILE,
        assign_weights,
        named_weights,
        save_model,
    )
    from albert_tf.serving import recovery
    from albert_tf.storage import write_json_atomic
    from albert_tf.tasks import get_task
    from albert_tf.tokenizers import load_tokenizer

    spec = get_task("tagging")
    metadata = recovery.read_metadata(shipped)
    import tensorflow as tf

    root = tf.saved_model.load(shipped)
    arrays = {
        key: variable.numpy()
        for variable in root.serving_variables
        if not (key := recovery.variable_key(variable.name)).startswith("albert_token_classifier")
    }
    config = recovery.recovered_config(arrays, **fields)
    model = spec.load("model").from_albert_config(config, num_tags=len(metadata["label_names"]))
    values = {
        name: arrays[key]
        for name, variable in named_weights(model).items()
        if (key := recovery.variable_key(variable.value.name)) in arrays
        and not name.startswith(spec.head_prefix)
    }
    constants = recovery.frozen_layer_norms(shipped)
    for name in named_weights(model):
        if name not in values and name.endswith(("/gamma", "/beta")):
            value = recovery.layer_norm_value(name, constants)
            if value is not None:
                values[name] = value
    assign_weights(model, values, allow_missing_prefixes=(spec.head_prefix,))
    start_dir = os.path.join(out_dir, "dense_start")
    tokenizer = load_tokenizer(os.path.join(shipped, "assets.extra", "tokenizer"))
    save_model(model, start_dir, tokenizer=tokenizer)
    write_json_atomic(os.path.join(start_dir, SETTINGS_FILE), metadata["finetune"])
    return start_dir


def dense_tagger(start_dir: str, out_dir: str, steps: int) -> str:
    """`tagger_encoder`'s model tuned ``steps`` steps on synthetic text by
    `albert_tf.run_finetuning`; returns its best checkpoint.

    The shipped tagger's BiLSTM + CRF head has no Hugging Face form; the peers need
    the same weights as ours, not a good model, so a short run is enough.
    """
    from albert_tf import FineTuningOptions, run_finetuning
    from albert_tf.checkpoints.saved_format import read_finetune_settings
    from albert_tf.tasks.tagging.settings import TaggingSettings

    settings = read_finetune_settings(start_dir)
    train_file = os.path.join(out_dir, "synthetic_tagging.jsonl")
    with open(train_file, "w", encoding="utf-8") as f:
        for row in synthetic_tagging_items(400):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary = run_finetuning(
        FineTuningOptions(
            os.path.join(out_dir, "dense_run"),
            [train_file],
            task="tagging",
            settings=TaggingSettings(tagger_lstm_units=0, tagger_crf=False),
            checkpoint=start_dir,
            max_seq_length=int(settings.get("max_seq_length", 128)),
            batch_size=16,
            learning_rate=1e-3,
            adam_bias_correction=True,
            num_train_steps=steps,
            eval_every=steps,
            precision="float32",
            jit_compile=False,
            fused_kernels=False,
            progress=False,
        )
    )
    return summary["best_dir"]


def config_fields(spec: TaskBench) -> dict[str, Any]:
    """The config of the shipped encoder the task's model was fine-tuned from: the
    fields recovery cannot read from the weights' shapes (layers, activation, ...)."""
    from albert_tf.checkpoints.saved_format import read_config

    return dataclasses.asdict(read_config(os.path.join(PRETRAINED, spec.pretrained)))


def prepare_task(spec: TaskBench, args: argparse.Namespace) -> dict[str, Any]:
    from albert_tf.checkpoints.hf_export import export_hf
    from albert_tf.serving import export_saved_model
    from albert_tf.serving.recovery import recover_checkpoint

    out = task_dir(args.workdir, spec.name)
    shutil.rmtree(out, ignore_errors=True)  # what a failed run left
    start = time.perf_counter()
    shipped = os.path.join(SHIPPED, spec.shipped)
    info: dict[str, Any] = {"shipped": f"models/exported/{spec.shipped}"}
    if spec.name == "tagging":
        steps = 4 if args.smoke else args.tagger_steps
        start_dir = tagger_encoder(shipped, out, config_fields(spec))
        model_dir = dense_tagger(start_dir, out, steps)
        info["dense_head"] = (
            f"dense head on the shipped tagger's encoder, {steps} steps on synthetic text "
            "(the shipped BiLSTM + CRF head does not convert to Hugging Face)"
        )
    else:
        model_dir = os.path.join(out, "recovered")
        recover_checkpoint(shipped, model_dir, head_arguments=spec.head, **config_fields(spec))
    info["recover_s"] = round(time.perf_counter() - start, 1)
    info["hf"] = export_hf(model_dir, hf_dir(args.workdir, spec.name))["architecture"]
    info["saved_models"], info["saved_model_bytes"], info["export_s"] = {}, {}, {}
    for variant in args.variants:
        if variant not in SAVEDMODELS:
            continue
        precision, jit = SAVEDMODELS[variant]
        begin = time.perf_counter()
        path = export_saved_model(
            model_dir,
            os.path.join(out, "exported", variant),
            version=1,
            serving_precision=precision,
            jit_compile=jit,
        )
        info["export_s"][variant] = round(time.perf_counter() - begin, 1)
        info["saved_models"][variant] = path
        info["saved_model_bytes"][variant] = dir_bytes(path)
    with open(os.path.join(model_dir, "finetune.json")) as f:
        info["settings"] = {
            k: v for k, v in json.load(f).items() if k not in ("metrics", "label_names")
        }
    return info


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Every task's models in ``--workdir``; what was built goes to ``prepare.json``."""
    info = {"tasks": {task: prepare_task(TASKS[task], args) for task in args.tasks}}
    with open(os.path.join(args.workdir, PREPARED), "w") as f:
        json.dump(info, f, indent=2)
    return info
