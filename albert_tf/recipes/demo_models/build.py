"""One language's demo build: its stages in order, each skipped when its output exists."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from albert_tf.recipes.demo_models.card import model_card
from albert_tf.recipes.demo_models.items import ITEMS_VERSION, prepare
from albert_tf.recipes.demo_models.scoring import evaluate, rescore
from albert_tf.storage import write_json_atomic

STAGES = ("prepare", "pretrain", "finetune", "combine", "evaluate", "export", "rescore")
#: Stages a plain run does; ``rescore`` is asked for by name.
DEFAULT_STAGES = STAGES[:-1]


@dataclasses.dataclass(frozen=True)
class DemoBuild:
    """What one language's build is given (the ``demo_models`` flags, resolved)."""

    #: ``"zh"`` or ``"en"``.
    lang: str
    #: Resolved corpus files whose documents are split into the three parts.
    corpora: Sequence[str]
    #: Multiple-choice sets the evaluate stage also scores (a missing one is left out).
    shared_sets: Sequence[str] = ()
    #: Pretrained model directory to fine-tune from; empty: pretrain one first.
    encoder: str = ""
    stages: Sequence[str] = DEFAULT_STAGES
    #: This language's work goes to ``<work_dir>/<lang>``.
    work_dir: str = "runs/demo_models"
    #: The SavedModel goes to ``<export_base>/albert_demo_<lang>/<version>``.
    export_base: str = "models/exported"
    #: Where ``demo_<lang>_{pretrain,finetune}.flags`` are.
    configs_dir: str = "configs"
    version: int = 1
    #: A SavedModel scored beside the new one; None: the newest earlier version.
    previous_model: str | None = None
    #: The items' distractors and answer positions, and the dev documents.
    seed: int = 0
    #: Also pretrain on the fine-tuning documents no dev item comes from.
    pretrain_on_finetune_text: bool = False

    @property
    def work(self) -> str:
        return os.path.join(self.work_dir, self.lang)

    @property
    def export_dir(self) -> str:
        return os.path.join(self.export_base, f"albert_demo_{self.lang}")


def _run(args: list[str], log_path: str) -> float:
    """Runs a command of this package in a subprocess, teeing to a log; returns seconds."""
    start = time.time()
    print("$ " + " ".join(args), flush=True)
    with open(log_path, "a", encoding="utf-8") as log:
        process = subprocess.run(
            [sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, check=False
        )
    if process.returncode != 0:
        raise ChildProcessError(f"{args[0]} failed (exit {process.returncode}); see {log_path}")
    return time.time() - start


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _check_prepared(demo: DemoBuild, data: str, stages: Sequence[str], pre: str) -> None:
    """Refuses a data folder prepared by another recipe version, or without the
    pretraining text a pending pretraining run asks for."""
    prepared_path = os.path.join(data, "prepare.json")
    if not os.path.exists(prepared_path):
        return
    prepared = _read_json(prepared_path)
    cached_items = prepared.get("items_version", 1)
    if cached_items != ITEMS_VERSION and {"pretrain", "finetune", "evaluate"} & set(stages):
        # Older work dirs train on full-budget contexts only, lack the one-sentence
        # test items, and their tokenizer does not fold full-width text.
        raise ValueError(
            f"{data} was prepared by an older demo_models (items version "
            f"{cached_items}, now {ITEMS_VERSION}); use a new --work_dir"
        )
    if "pretrain" in stages and not os.path.isdir(os.path.join(pre, "final")):
        # A cached split must hold the pretraining text this build asks for.
        cached = prepared.get("pretrain_on_finetune_text", False)
        if cached != demo.pretrain_on_finetune_text:
            raise ValueError(
                f"{data} was prepared {'with' if cached else 'without'} "
                "--pretrain_on_finetune_text; pass the same, or use another --work_dir"
            )


def build(demo: DemoBuild) -> None:
    """Runs ``demo.stages`` for one language; a stage whose output exists is not redone."""
    work = demo.work
    os.makedirs(work, exist_ok=True)
    times_path = os.path.join(work, "times.json")
    times = _read_json(times_path) if os.path.exists(times_path) else {}
    data, pre, fine = (os.path.join(work, d) for d in ("data", "pretrain", "finetune"))
    lang, configs, encoder = demo.lang, demo.configs_dir, demo.encoder
    if encoder and "finetune" in demo.stages:
        print(f"[{lang}] fine-tuning from {encoder}: no pretraining stage")
        if os.path.isdir(os.path.join(pre, "final")):
            print(
                f"[{lang}] warning: {pre}/final (this work dir's own pretraining) is not "
                f"used; --{lang}_encoder= (empty) fine-tunes from it",
                file=sys.stderr,
            )
    # With an encoder, there is nothing to pretrain.
    stages = [s for s in demo.stages if not (encoder and s == "pretrain")]
    _check_prepared(demo, data, stages, pre)

    prepared_path = os.path.join(data, "prepare.json")
    if "prepare" in stages and not os.path.exists(prepared_path):
        start = time.time()
        summary = prepare(
            lang,
            demo.corpora,
            data,
            seed=demo.seed,
            pretrain_on_finetune_text=demo.pretrain_on_finetune_text,
        )
        times["prepare"] = time.time() - start
        print(f"[{lang}] prepared: {json.dumps(summary)}")
    if "pretrain" in stages and not os.path.isdir(os.path.join(pre, "final")):
        times["pretrain"] = times.get("pretrain", 0.0) + _run(
            [
                "albert_tf.pretrain",
                f"--flagfile={configs}/demo_{lang}_pretrain.flags",
                f"--corpus={data}/pretrain.jsonl",
                f"--model_dir={pre}",
                "--progress_bar=false",
            ],
            os.path.join(work, "pretrain.log"),
        )
    if "finetune" in stages and not os.path.exists(os.path.join(fine, "summary.json")):
        # The card says where fine-tuning started (model_card reads it).
        write_json_atomic(os.path.join(work, "start.json"), {"encoder": encoder or None})
        times["finetune"] = _run(
            [
                "albert_tf.finetune",
                f"--flagfile={configs}/demo_{lang}_finetune.flags",
                f"--checkpoint={encoder or pre + '/final'}",
                f"--train_files={data}/train.jsonl",
                f"--dev_files={data}/dev.jsonl",
                f"--test_files={data}/test.jsonl",
                f"--output_dir={fine}",
                "--progress=false",
            ],
            os.path.join(work, "finetune.log"),
        )
    from albert_tf.checkpoints.saved_format import read_finetune_settings

    best = os.path.join(fine, "best")
    if "combine" in stages and "overlap_combination" not in read_finetune_settings(best):
        from albert_tf.recipes.demo_models.combine import combine, pretraining_documents

        # The best dev checkpoint's score plus the overlap, weighted on the same dev items;
        # the fit lives in its finetune.json (a new fine-tuning run has none).
        record = combine(
            best,
            os.path.join(data, "dev.jsonl"),
            pretraining_documents(os.path.join(data, "pretrain.jsonl")),
        )
        write_json_atomic(os.path.join(work, "combination.json"), record)
        print(f"[{lang}] combined with the overlap: {json.dumps(record)}")
    write_json_atomic(times_path, times)
    if "evaluate" in stages:
        previous = demo.previous_model or previous_export(demo.export_dir, demo.version)
        report = evaluate(os.path.join(fine, "best"), data, demo.shared_sets, previous)
        write_json_atomic(os.path.join(work, "evaluation.json"), report)
        print(f"[{lang}] {json.dumps(report, ensure_ascii=False)}")
    if "export" in stages:
        from albert_tf.serving import export_saved_model

        path = export_saved_model(
            os.path.join(fine, "best"),
            demo.export_dir,
            version=demo.version,
            model_card=model_card(lang, work),
        )
        print(f"[{lang}] exported {path}")
    if "rescore" in stages:
        saved_model = os.path.join(demo.export_dir, str(demo.version))
        print(f"[{lang}] rescored {rescore(lang, data, saved_model)}")


def previous_export(export_dir: str, version: int) -> str | None:
    """The newest version in ``export_dir`` below ``version`` (None: there is none)."""
    if not os.path.isdir(export_dir):
        return None
    versions = [int(v) for v in os.listdir(export_dir) if v.isdigit() and int(v) < version]
    return os.path.join(export_dir, str(max(versions))) if versions else None
