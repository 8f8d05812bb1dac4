"""Multiple-choice inference latency: exported SavedModel vs bare encoder vs Hugging Face.

One ALBERT-base-shaped multiple-choice model (V=30000, E=128, H=768, 12
shared layers, 12 heads, FFN 3072, random weights: latency does not depend
on them) with an English SentencePiece tokenizer trained here on the in-repo
sample, exported with the package's exporter (`albert_tf.serving.export_saved_model`,
default limits: max_seq_length 512, max_qa_length 128, batches packed to
their longest option). Workloads: real parable_en items (a ~100-150-word
story, a 8-word question, 4 options of <= 12 words), one item (batch 1) and
32 items (batch 32). Variants, each timed in its own fresh process:

* ``savedmodel``: `tf.saved_model.load` + the ``serving_default`` signature on
  raw strings (in-graph tokenisation and packing, forward, softmax); the
  worker imports only tensorflow and tensorflow_text, as a server would;
* ``savedmodel_score_ids`` / ``savedmodel_tokenize``: the SavedModel's other
  two signatures (forward on packed ids; tokenisation alone), which split the
  ``serving_default`` time into its two halves;
* ``bare_encoder``: the Keras `AlbertMultipleChoice` (same checkpoint) in a
  `tf.function` on the already packed int32 ids of the same [B, 4, S] shape;
* ``hf``: transformers' `AlbertTokenizerFast` (built offline from the same
  ``spiece.model``) + `AlbertForMultipleChoice` (same config, random weights,
  eval mode, `torch.inference_mode`, SDPA attention); tokeniser and model times
  are also reported apart, and the slow `AlbertTokenizer` is timed too.

Writes ``bench/results/serving.json`` and prints a markdown table::

    python bench/serving.py                          # everything (~10-15 min, 2 cores)
    python bench/serving.py --smoke                  # tiny model, checks the plumbing
    python bench/serving.py --workloads=batch1 --repeats=3
    python bench/serving.py --variants=savedmodel,hf --workdir=/tmp/srv  # keeps/reuses the export

Ratios (medians, same run): ``savedmodel / bare_encoder`` (the serving
wrapper's overhead; target <= 1.3 at batch 1) and ``hf / savedmodel``
(target >= 2: above 1 means the SavedModel is faster).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from common import (
    MULTIPLE_CHOICE_DATA,
    add_common_flags,
    build_padded_tokenizer,
    choices,
    dir_bytes,
    fmt,
    machine_info,
    model_config,
    output_path,
    pin_tf_threads,
    pin_torch_threads,
    publish,
    spawn,
    summary_stats,
    thread_env,
    thread_report,
    time_step,
    worker_main,
    write_report,
)

NAME = "serving"
VARIANTS = ("savedmodel", "savedmodel_score_ids", "savedmodel_tokenize", "bare_encoder", "hf")
WORKLOADS = {"batch1": 1, "batch32": 32}
NUM_OPTIONS = 4
ITEMS_FILE = os.path.join(MULTIPLE_CHOICE_DATA, "parable_en.jsonl.gz")
PREPARED = "prepare.json"
FIELDS = ("token_ids", "segment_ids", "padding_mask")


# --------------------------------------------------------------------------- workload
def build_qa(question: str, option: str) -> str:
    """The packer's question+option rule, for the Hugging Face side (which
    must not import albert_tf/TensorFlow): fill the blank, else append."""
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def typical_items(
    count: int,
    path: str = ITEMS_FILE,
    context_words: tuple[int, int] = (100, 150),
    max_option_words: int = 12,
) -> list[dict[str, Any]]:
    """The first ``count`` items of typical size, each cut to `NUM_OPTIONS` options.

    Typical: a context of ``context_words`` words and options of at most
    ``max_option_words`` words; the answer plus the first short distractors
    are kept, in their original order.
    """
    items = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if not context_words[0] <= len(record["context"].split()) <= context_words[1]:
                continue
            short = [
                i for i, o in enumerate(record["options"]) if len(o.split()) <= max_option_words
            ]
            if record["label"] not in short or len(short) < NUM_OPTIONS:
                continue
            others = [i for i in short if i != record["label"]][: NUM_OPTIONS - 1]
            keep = sorted([record["label"], *others])
            items.append(
                {
                    "id": record["id"],
                    "context": record["context"],
                    "question": record["question"],
                    "options": [record["options"][i] for i in keep],
                    "label": keep.index(record["label"]),
                }
            )
            if len(items) == count:
                return items
    raise ValueError(f"only {len(items)} typical items in {path}, need {count}")


def workload_texts(workdir: str, name: str) -> dict[str, list]:
    with open(os.path.join(workdir, "workloads.json"), encoding="utf-8") as f:
        return json.load(f)[name]


def workload_ids(workdir: str, name: str) -> dict[str, Any]:
    import numpy as np

    with np.load(os.path.join(workdir, f"ids_{name}.npz")) as data:
        return {k: data[k] for k in FIELDS}


# --------------------------------------------------------------------------- prepare
def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Tokenizer, model directory, SavedModel export and packed workloads in ``--workdir``."""
    import keras
    import numpy as np
    import tensorflow as tf

    import albert_tf
    from albert_tf.data.multiple_choice import pack_multiple_choice
    from albert_tf.serving import export_saved_model
    from albert_tf.tokenizers import load_tokenizer

    workdir = args.workdir
    config = model_config(args.smoke)
    tok_dir = os.path.join(workdir, "tokenizer")
    tok_info = build_padded_tokenizer(tok_dir, config.vocab_size, args.smoke)
    tokenizer = load_tokenizer(tok_dir)
    keras.utils.set_random_seed(0)
    model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    model_dir = os.path.join(workdir, "model")
    albert_tf.save_model(model, model_dir, tokenizer=tokenizer)
    start = time.perf_counter()
    # No finetune.json: the exporter's own defaults set the packing limits.
    saved_model = export_saved_model(model_dir, os.path.join(workdir, "exported"), version=1)
    export_s = time.perf_counter() - start
    with open(os.path.join(saved_model, "assets.extra", "albert_tf.json")) as f:
        meta = json.load(f)

    largest = max(WORKLOADS.values())
    items = typical_items(largest)
    texts, shapes = {}, {}
    for name, batch in WORKLOADS.items():
        chosen = items[:batch]
        texts[name] = {
            "ids": [it["id"] for it in chosen],
            "context": [it["context"] for it in chosen],
            "question": [it["question"] for it in chosen],
            "options": [it["options"] for it in chosen],
        }
        # The same packing function the SavedModel runs in-graph.
        packed = pack_multiple_choice(
            tokenizer,
            tf.constant(texts[name]["context"]),
            tf.constant(texts[name]["question"]),
            tf.constant(texts[name]["options"]),
            max_seq_length=meta["max_seq_length"],
            max_qa_length=meta["max_qa_length"],
        )
        arrays = {k: packed[k].numpy().astype("int32") for k in FIELDS}
        np.savez(os.path.join(workdir, f"ids_{name}.npz"), **arrays)
        lengths = arrays["padding_mask"].sum(-1).reshape(-1).tolist()
        words_per_sequence = [
            len(f"{c} {q} {o}".split())
            for c, q, opts in zip(
                texts[name]["context"], texts[name]["question"], texts[name]["options"], strict=True
            )
            for o in opts
        ]
        words = {
            part: summary_stats(
                [len(t.split()) for t in texts[name][part]]
                if part != "options"
                else [len(o.split()) for opts in texts[name]["options"] for o in opts]
            )
            for part in ("context", "question", "options")
        }
        shapes[name] = {
            "batch": batch,
            "options": NUM_OPTIONS,
            "packed_shape": list(arrays["token_ids"].shape),
            "encoder_shape": [batch * NUM_OPTIONS, int(arrays["token_ids"].shape[-1])],
            "sequence_lengths": summary_stats(lengths),
            "padding_fraction": round(1 - sum(lengths) / arrays["token_ids"].size, 3),
            "truncated": bool(packed["context_truncated"].numpy().any()),
            # The sample-trained 4.4k-piece vocabulary splits words more than a
            # real 30k one would, so sequences are somewhat longer than ALBERT's.
            "pieces_per_word": round(
                (sum(lengths) - 3 * len(lengths)) / sum(words_per_sequence), 2
            ),
            "words": words,
        }
    with open(os.path.join(workdir, "workloads.json"), "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    info = {
        "config": config.to_hf_dict(),
        "tokenizer": tok_info,
        "saved_model": saved_model,
        "saved_model_bytes": dir_bytes(saved_model),
        "export_s": round(export_s, 1),
        "max_seq_length": meta["max_seq_length"],
        "max_qa_length": meta["max_qa_length"],
        "packing": "each batch padded to its longest packed option (exporter's behaviour)",
        "workloads": shapes,
        "items_file": os.path.relpath(ITEMS_FILE, os.getcwd()),
    }
    with open(os.path.join(workdir, PREPARED), "w") as f:
        json.dump(info, f, indent=2)
    return info


# --------------------------------------------------------------------------- variants
def _rename_checksum(timing: dict[str, Any]) -> dict[str, Any]:
    # time_step calls the step's return value a loss; here it is a checksum
    # that forces the outputs (and shows every variant computed something).
    timing["checksum_first"] = timing.pop("loss_first_step")
    timing["checksum_last"] = timing.pop("loss_last_step")
    return timing


def measure_savedmodel(args: argparse.Namespace, signature: str) -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    with open(os.path.join(args.workdir, PREPARED)) as f:
        path = json.load(f)["saved_model"]
    start = time.perf_counter()
    loaded = tf.saved_model.load(path)
    load_s = time.perf_counter() - start
    fn = loaded.signatures[signature]
    texts = workload_texts(args.workdir, args.workload)
    ids = workload_ids(args.workdir, args.workload)
    info: dict[str, Any] = {"load_s": round(load_s, 2), "signature": signature}
    if signature == "score_ids":
        inputs = {k: tf.constant(v) for k, v in ids.items()}

        def step() -> float:
            return float(tf.reduce_sum(fn(**inputs)["logits"]))

    else:

        def call() -> dict[str, tf.Tensor]:
            # Strings arrive from the request each time, as in a server.
            return fn(
                context=tf.constant(texts["context"]),
                question=tf.constant(texts["question"]),
                options=tf.constant(texts["options"]),
            )

        if signature == "tokenize":
            # The graph's packing must equal what the other variants are fed.
            out = call()
            info["same_ids_as_prepared"] = all(
                np.array_equal(out[k].numpy(), ids[k]) for k in FIELDS
            )

            def step() -> float:
                return float(tf.reduce_sum(call()["token_ids"]))

        else:

            def step() -> float:
                return float(tf.reduce_sum(call()["logits"]))

    timing = _rename_checksum(time_step(step, args.warmup, args.repeats))
    return {**timing, **info, "input_shape": list(ids["token_ids"].shape)}


def measure_bare_encoder(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    import albert_tf

    model = albert_tf.load_multiple_choice(os.path.join(args.workdir, "model"))
    ids = workload_ids(args.workdir, args.workload)
    inputs = {k: tf.constant(v) for k, v in ids.items()}
    spec = tf.TensorSpec([None, None, None], tf.int32)

    # Dynamic shapes as in the SavedModel's signatures: no retracing per length.
    @tf.function(input_signature=[spec, spec, spec])
    def forward(token_ids, segment_ids, padding_mask):
        features = {"token_ids": token_ids, "segment_ids": segment_ids}
        return model(features | {"padding_mask": padding_mask}, training=False)

    def step() -> float:
        return float(tf.reduce_sum(forward(**inputs)))

    timing = _rename_checksum(time_step(step, args.warmup, args.repeats))
    return {
        **timing,
        "model": "albert_tf.AlbertMultipleChoice (same checkpoint) in tf.function, packed ids",
        "input_shape": list(ids["token_ids"].shape),
    }


def measure_hf(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch
    import transformers

    with open(os.path.join(args.workdir, "model", "config.json")) as f:
        ours = json.load(f)
    if ours.pop("share") != "all" or ours.pop("model_type") != "albert":
        raise ValueError("Hugging Face ALBERT shares all layers; this config does not")
    torch.manual_seed(0)
    config = transformers.AlbertConfig(**ours, attn_implementation=args.hf_attention)
    model = transformers.AlbertForMultipleChoice(config).eval()
    spiece = os.path.join(args.workdir, "tokenizer", "spiece.model")
    fast = transformers.AlbertTokenizerFast(vocab_file=spiece)
    slow = transformers.AlbertTokenizer(vocab_file=spiece)
    with open(os.path.join(args.workdir, PREPARED)) as f:
        max_seq_length = json.load(f)["max_seq_length"]
    texts = workload_texts(args.workdir, args.workload)
    batch = len(texts["context"])
    firsts = [c for c in texts["context"] for _ in range(NUM_OPTIONS)]
    per_item = zip(texts["question"], texts["options"], strict=True)
    seconds = [build_qa(q, o) for q, opts in per_item for o in opts]

    def encode(tokenizer) -> dict[str, torch.Tensor]:
        enc = tokenizer(
            firsts,
            seconds,
            truncation="only_first",  # the context is cut first, as our packer does
            max_length=max_seq_length,
            padding="longest",  # to the batch's longest, as the SavedModel
            return_tensors="pt",
        )
        return {k: v.view(batch, NUM_OPTIONS, -1) for k, v in enc.items()}

    ids = workload_ids(args.workdir, args.workload)

    def same_ids(enc: dict[str, torch.Tensor]) -> bool:
        pairs = zip(("input_ids", "token_type_ids", "attention_mask"), FIELDS, strict=True)
        return all(
            tuple(enc[h].shape) == ids[o].shape and np.array_equal(enc[h].numpy(), ids[o])
            for h, o in pairs
        )

    tok_times: list[float] = []
    model_times: list[float] = []

    def step() -> float:
        start = time.perf_counter()
        enc = encode(fast)
        mid = time.perf_counter()
        with torch.inference_mode():
            value = float(model(**enc).logits.sum())
        tok_times.append(mid - start)
        model_times.append(time.perf_counter() - mid)
        return value

    timing = _rename_checksum(time_step(step, args.warmup, args.repeats))

    def stats(times: list[float]) -> dict[str, float]:
        times = times[-args.repeats :]  # the timed calls, not the warm-up
        return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}

    slow_times = []
    encode(slow)  # first call builds caches
    for _ in range(args.repeats):
        start = time.perf_counter()
        encode(slow)
        slow_times.append(time.perf_counter() - start)
    enc, enc_slow = encode(fast), encode(slow)
    return {
        **timing,
        "tokenizer_fast": stats(tok_times),
        "tokenizer_slow": stats(slow_times),
        "model_forward": stats(model_times),
        "same_ids_as_ours": {"fast": same_ids(enc), "slow": same_ids(enc_slow)},
        "input_shape": list(enc["input_ids"].shape),
        "input_shape_slow": list(enc_slow["input_ids"].shape),
        "model": "transformers AlbertForMultipleChoice, eval, torch.inference_mode",
        "attention": model.config._attn_implementation,
        "tokenizer": "AlbertTokenizerFast (converted offline from the same spiece.model)",
    }


# --------------------------------------------------------------------------- worker
def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    os.environ.update(thread_env(cores, args.inter_op_threads, args.omp_wait_policy))
    if args.worker == "prepare":
        pin_tf_threads(cores, args.inter_op_threads)
        return prepare(args)
    if args.worker == "hf":
        os.environ["USE_TF"] = "0"  # transformers must not pull TensorFlow in
        pin_torch_threads(cores, args.inter_op_threads)
        return measure_hf(args)
    pin_tf_threads(cores, args.inter_op_threads)
    if args.worker == "bare_encoder":
        return measure_bare_encoder(args)
    signature = {
        "savedmodel": "serving_default",
        "savedmodel_score_ids": "score_ids",
        "savedmodel_tokenize": "tokenize",
    }[args.worker]
    return measure_savedmodel(args, signature)


# --------------------------------------------------------------------------- report
def summarize(report: dict[str, Any]) -> None:
    """Ratios of medians per workload, in place."""
    for workload, variants in report["results"].items():
        med = {v: r["median_s"] for v, r in variants.items() if "median_s" in r}
        hf = variants.get("hf", {})
        ratios: dict[str, Any] = {}
        if "savedmodel" in med and "bare_encoder" in med:
            ratio = med["savedmodel"] / med["bare_encoder"]
            ratios["savedmodel_over_bare_encoder"] = round(ratio, 3)
            ratios["target_savedmodel_over_bare_encoder"] = "<= 1.3 at batch 1"
        if "savedmodel" in med and "hf" in med:
            ratios["hf_over_savedmodel"] = round(med["hf"] / med["savedmodel"], 3)
            ratios["target_hf_over_savedmodel"] = ">= 2"
        if "bare_encoder" in med and "model_forward" in hf:
            ratios["hf_forward_over_bare_encoder"] = round(
                hf["model_forward"]["median_s"] / med["bare_encoder"], 3
            )
        if "savedmodel" in med and "savedmodel_tokenize" in med:
            ratios["tokenize_share_of_savedmodel"] = round(
                med["savedmodel_tokenize"] / med["savedmodel"], 3
            )
        report["ratios"][workload] = ratios


def markdown(report: dict[str, Any]) -> str:
    prep = report["prepared"]
    cfg = prep["config"]
    lines = [
        f"Model: V={cfg['vocab_size']}, E={cfg['embedding_size']}, H={cfg['hidden_size']}, "
        f"L={cfg['num_hidden_layers']} (shared), heads {cfg['num_attention_heads']}, "
        f"FFN {cfg['intermediate_size']}; tokenizer {prep['tokenizer']['trained_pieces']} "
        f"trained pieces padded to {prep['tokenizer']['vocab_size']}; exporter limits "
        f"max_seq_length {prep['max_seq_length']}, max_qa_length {prep['max_qa_length']} "
        "(batches padded to their longest option); "
        f"CPU {report['machine']['cpu_model']}, {report['machine']['cores']} cores",
        "",
    ]
    for workload in report["results"]:
        w = prep["workloads"][workload]
        lengths = w["sequence_lengths"]
        lines.append(
            f"{workload}: packed {w['packed_shape']} (real lengths min {lengths['min']}, "
            f"median {lengths['median']}, max {lengths['max']}; {w['padding_fraction']:.0%} "
            f"padding; {w['pieces_per_word']} pieces/word; context median "
            f"{w['words']['context']['median']} words)"
        )
    lines += [
        "",
        "| workload | variant | encoder input [B·C, S] | median ms | min ms | max ms | items/s "
        "| other CPU | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, variants in report["results"].items():
        batch = prep["workloads"][workload]["batch"]
        for name, r in variants.items():
            if "median_s" not in r:
                error = str(r.get("error", "no result"))[:120].replace("|", "/")
                lines.append(f"| {workload} | {name} | failed: {error} |||||||")
                continue
            # Each variant's own input: HF's fast tokenizer may pack a piece or two differently.
            b, c, length = r["input_shape"]
            shape = (b * c, length)
            note = ""
            if name.startswith("savedmodel"):
                note = f"signature {r['signature']}, load {r['load_s']} s"
            if name == "hf":
                same = {k: "yes" if v else "no" for k, v in r["same_ids_as_ours"].items()}
                note = (
                    f"fast tokeniser + forward ({r['attention']}); ids equal ours: "
                    f"fast {same['fast']}, slow {same['slow']}"
                )
            lines.append(
                f"| {workload} | {name} | {shape[0]}×{shape[1]} | {r['median_s'] * 1e3:.1f} "
                f"| {r['min_s'] * 1e3:.1f} | {r['max_s'] * 1e3:.1f} "
                f"| {batch / r['median_s']:.2f} "
                f"| {fmt(r['other_processes_cpu_fraction'], '.0%')} | {note} |"
            )
            if name == "hf":
                for part in ("tokenizer_fast", "tokenizer_slow", "model_forward"):
                    p = r[part]
                    key = "input_shape_slow" if part == "tokenizer_slow" else "input_shape"
                    b, c, length = r[key]
                    lines.append(
                        f"| {workload} | hf: {part} | {b * c}×{length} "
                        f"| {p['median_s'] * 1e3:.1f} | {p['min_s'] * 1e3:.1f} "
                        f"| {p['max_s'] * 1e3:.1f} | | | |"
                    )
    lines.append("")
    for workload, ratios in report["ratios"].items():
        shown = ", ".join(f"{k} {v}" for k, v in ratios.items() if not k.startswith("target"))
        lines.append(f"{workload}: {shown or 'no ratios (missing variants)'}")
    lines.append(
        "Targets: savedmodel/bare_encoder <= 1.3 at batch 1; hf/savedmodel >= 2 "
        "(>1: the SavedModel is faster)."
    )
    return "\n".join(lines)


def orchestrate(args: argparse.Namespace) -> None:
    variants = choices(args.variants, VARIANTS, "variant")
    workloads = choices(args.workloads, tuple(WORKLOADS), "workload")
    output = output_path(args, NAME)
    own_workdir = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="albert_serving_")
    os.makedirs(workdir, exist_ok=True)
    script = os.path.abspath(__file__)
    common_args = ["--workdir", workdir, "--hf_attention", args.hf_attention]
    report: dict[str, Any] = {
        "what": "latency of one multiple-choice request (4 options per item): exported "
        "SavedModel on raw text vs the bare Keras model on packed ids vs Hugging Face",
        "command": [os.path.relpath(__file__), *sys.argv[1:]],
        "smoke": args.smoke,
        "machine": machine_info(),
        "threads": thread_report(args),
        "results": {w: {} for w in workloads},
        "ratios": {},
    }
    try:
        prepared = os.path.join(workdir, PREPARED)
        if os.path.exists(prepared):  # --workdir of an earlier run: reuse its export
            with open(prepared) as f:
                report["prepared"] = json.load(f)
        else:
            print("[prepare] tokenizer, model, export ...", file=sys.stderr, flush=True)
            report["prepared"] = spawn(script, ["--worker", "prepare", *common_args], args)
            if "error" in report["prepared"]:
                write_report(report, output)
                raise SystemExit(f"prepare failed: {report['prepared']['error']}")
        for workload in workloads:
            warmup, repeats = (
                (args.warmup, args.repeats)
                if WORKLOADS[workload] == 1
                else (args.large_warmup, args.large_repeats)
            )
            for v in variants:
                print(f"[{v}] {workload} ...", file=sys.stderr, flush=True)
                worker = ["--worker", v, "--workload", workload, *common_args]
                worker += ["--warmup", str(warmup), "--repeats", str(repeats)]
                r = spawn(script, worker, args)
                report["results"][workload][v] = r
                done = f"{r['median_s'] * 1e3:.1f} ms" if "median_s" in r else r["error"]
                print(f"[{v}] {workload}: {done}", file=sys.stderr, flush=True)
                summarize(report)
                write_report(report, output)
    finally:
        if own_workdir and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    summarize(report)
    publish(report, output, markdown(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_flags(parser)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=None, help="timed calls, batch 1 (20)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls, batch 1 (3)")
    parser.add_argument(
        "--large_repeats", type=int, default=None, help="timed calls, batch 32 (3: ~1 min each)"
    )
    parser.add_argument("--large_warmup", type=int, default=None, help="untimed, batch 32 (1)")
    parser.add_argument(
        "--workdir", default=None, help="keep/reuse tokenizer, model and export here"
    )
    parser.add_argument("--keep_workdir", action="store_true", help="keep the temp workdir")
    parser.add_argument(
        "--hf_attention",
        default="sdpa",
        choices=("sdpa", "eager"),
        help="transformers attention implementation (sdpa: fused kernel, faster on CPU)",
    )
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = 2 if args.smoke else 20
    if args.warmup is None:
        args.warmup = 1 if args.smoke else 3
    if args.large_repeats is None:
        args.large_repeats = 2 if args.smoke else 3
    if args.large_warmup is None:
        args.large_warmup = 1
    if args.worker:
        worker_main(lambda: run_worker(args))
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
