"""Multiple-choice fine-tuning throughput: batches padded to their longest item vs to 512.

Times training steps (forward, backward, AdamW update: the step
`MultipleChoiceTrainer.fit` runs) of an ALBERT-base-shaped multiple-choice
model (random weights) on the shared SocialIQa (3 options) and parable_en
(5 options) sets, in items/second, with

Variants (``--variants``), the padding:

* ``dynamic``: the package default, each batch padded to its own longest item
  (`multiple_choice_batches`, shuffled and bucketed by length as in ``fit``);
* ``fixed``: the very same batches padded to ``max_seq_length`` (512), as
  google-research/albert's run_race feeds its TPUs. The data code has no
  option for this, so a benchmark-local wrapper zero-pads each batch (an
  all-zero padding mask is what the package's padding is anyway).

Steps take different times with dynamic padding, so the timed batches are
picked at evenly spaced quantiles of one shuffled epoch's padded lengths
(after ``--warmup`` untimed steps on the longest and the median batch):
their items/s estimates a whole epoch's. The input side is timed alone too:
packing (tokenise + pack every item once, what ``fit`` does before its first
step) and batching (collating an epoch), against what a step consumes.

Every measurement runs in its own fresh process. Writes
``bench/results/finetuning.json`` and prints a markdown table::

    python -m bench.finetuning                 # both sets, both paddings (~6-8 min, 2 cores)
    python -m bench.finetuning --smoke         # tiny model, few items: checks the plumbing
    python -m bench.finetuning --datasets=socialiqa --variants=dynamic --repeats=3
    python -m bench.finetuning --variants=     # the input side only (packing, lengths)

Memory decides the batch size. An fp32 ALBERT-base step keeps ~1.7 MB per
token of a 512-token sequence for the backward pass (measured: one parable_en
item, 5 × 512 tokens, peaked at 5.1 GiB), so batch 8 padded to 512 would need
~33 GiB on parable_en and ~21 GiB on SocialIQa. By default each dataset gets the
largest of 8/4/2/1 items whose *fixed*-length step fits ``--max_step_gb``
(12 GB: SocialIQa 4, parable_en 2), used for both paddings so that they train
on the same batches; ``--batch_size`` overrides it, and a worker refuses a
step that would not fit in the free RAM rather than risk the OOM killer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from typing import Any

from bench import common
from bench.common import (
    MULTIPLE_CHOICE_DATA,
    Job,
    Steps,
    build_padded_tokenizer,
    fmt,
    model_config,
    summary_stats,
    time_step,
)

DATASETS = {
    "socialiqa": "socialiqa_evals.jsonl.gz",
    "parable_en": "parable_en.jsonl.gz",
}
PADDINGS = ("dynamic", "fixed")
FIELDS = ("token_ids", "segment_ids", "padding_mask")
BATCH_CHOICES = (8, 4, 2, 1)
GB = 1024**3


def estimated_step_gb(batch: int, options: int, length: int) -> float:
    """Peak RSS of an ALBERT-base fp32 training step on [batch, options, length].

    From one measurement: parable_en, 1 item × 5 options × 512 tokens peaked
    at 5.1 GiB, i.e. ~1.1 GB (TF, model, AdamW, data) + ~1.7 MB per token at
    512, of which the [heads, S, S] attention probabilities kept for the
    backward pass grow with S. Batch 8 at 512 would need ~33 GiB.
    """
    tokens = batch * options * length
    return (1.1e9 + tokens * (1.0e6 + 1.4e3 * length)) / GB


def options_per_item(path: str) -> int:
    """Most options of any item (plain JSON: the orchestrator stays TensorFlow-free)."""
    import gzip
    import json

    with gzip.open(path, "rt", encoding="utf-8") as f:
        return max(len(json.loads(line).get("options", [])) for line in f if line.strip())


def auto_batch_size(args: argparse.Namespace, dataset: str) -> int:
    """The largest of `BATCH_CHOICES` whose fixed-length step fits ``--max_step_gb``.

    Both paddings use it: the comparison needs the same batches.
    """
    options = options_per_item(os.path.join(args.data_dir, DATASETS[dataset]))
    for batch in BATCH_CHOICES:
        if estimated_step_gb(batch, options, args.max_seq_length) <= args.max_step_gb:
            return batch
    return BATCH_CHOICES[-1]


def load_items(args: argparse.Namespace, dataset: str) -> list:
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice

    items, _ = read_multiple_choice([os.path.join(args.data_dir, DATASETS[dataset])])
    return items[: args.max_items] if args.max_items else items


def make_trainer(args: argparse.Namespace, workdir: str):
    """A `MultipleChoiceTrainer` on a fresh random model, as ``fit`` would use it."""
    import keras

    import albert_tf
    from albert_tf.tasks.multiple_choice.trainer import MultipleChoiceTrainer
    from albert_tf.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(os.path.join(args.workdir, "tokenizer"))
    keras.utils.set_random_seed(0)
    model = albert_tf.AlbertMultipleChoice.from_albert_config(model_config(args.smoke))
    return MultipleChoiceTrainer(
        model,
        tokenizer,
        output_dir=workdir,
        max_seq_length=args.max_seq_length,
        max_qa_length=args.max_qa_length,
        batch_size=args.batch_size,
        progress=False,
    )


def pad_to(features: dict[str, Any], length: int) -> dict[str, Any]:
    """Zero-pads [B, C, S] arrays to S = ``length`` (zeros: pad id 0, mask 0)."""
    import numpy as np

    return {k: np.pad(v, ((0, 0), (0, 0), (0, length - v.shape[-1]))) for k, v in features.items()}


def epoch_batches(args: argparse.Namespace, encoded: list) -> list:
    """One shuffled, length-bucketed epoch of full batches, exactly as ``fit`` draws them."""
    from albert_tf.tasks.multiple_choice.data import multiple_choice_batches

    batches = multiple_choice_batches(encoded, args.batch_size, shuffle=True, seed=0)
    return [b for b in batches if len(b[1]) == args.batch_size]


# --------------------------------------------------------------------------- workers
def prepare(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "tokenizer": build_padded_tokenizer(
            os.path.join(args.workdir, "tokenizer"), model_config(args.smoke).vocab_size, args.smoke
        )
    }


def measure_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    """Items/s of packing (tokenise + pack, once per run) and of batching (per step)."""
    import time

    import numpy as np

    from albert_tf.tasks.multiple_choice.data import encode_multiple_choice
    from albert_tf.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(os.path.join(args.workdir, "tokenizer"))
    start = time.perf_counter()
    items = load_items(args, args.dataset)
    read_s = time.perf_counter() - start

    def encode(chosen: list) -> list:
        return encode_multiple_choice(
            chosen,
            tokenizer,
            max_seq_length=args.max_seq_length,
            max_qa_length=args.max_qa_length,
        )

    encode(items[:16])  # first call builds the tf-text kernels: not per-item work
    start = time.perf_counter()
    encoded = encode(items)
    pack_s = time.perf_counter() - start

    start = time.perf_counter()
    batches = epoch_batches(args, encoded)
    batch_s = time.perf_counter() - start
    batched_items = args.batch_size * len(batches)
    start = time.perf_counter()
    for features, _ in batches:
        pad_to(features, args.max_seq_length)
    fixed_s = time.perf_counter() - start + batch_s

    item_lengths = [int(e["padding_mask"].sum(-1).max()) for e in encoded]
    option_lengths = [int(n) for e in encoded for n in e["padding_mask"].sum(-1)]
    padded = [f["token_ids"].shape[-1] for f, _ in batches]
    real = sum(int(f["padding_mask"].sum()) for f, _ in batches)
    slots = sum(int(f["token_ids"].size) for f, _ in batches)
    options = sum(f["token_ids"].shape[0] * f["token_ids"].shape[1] for f, _ in batches)
    return {
        "items": len(items),
        "options_per_item": summary_stats([len(it.options) for it in items]),
        "read_s": round(read_s, 2),
        "packing_s": round(pack_s, 2),
        "packing_items_per_s": round(len(items) / pack_s, 1),
        "batching_items_per_s": round(batched_items / batch_s, 1),
        "batching_fixed_items_per_s": round(batched_items / fixed_s, 1),
        "item_packed_length": summary_stats(item_lengths),  # an item's longest option
        "option_packed_length": summary_stats(option_lengths),
        "items_at_max_seq_length": int(sum(n >= args.max_seq_length for n in item_lengths)),
        "epoch_batches": len(batches),
        "epoch_padded_length": summary_stats(padded),
        "epoch_padding_fraction_dynamic": round(1 - real / slots, 3),
        "epoch_padding_fraction_fixed": round(1 - real / (options * args.max_seq_length), 3),
        "mean_length_fixed_over_dynamic": round(args.max_seq_length / float(np.mean(padded)), 2),
    }


def measure_training(args: argparse.Namespace) -> dict[str, Any]:
    """Items/s of the trainer's own train step on quantile-picked batches of one epoch."""
    import statistics

    with tempfile.TemporaryDirectory() as out:
        trainer = make_trainer(args, out)
        encoded = trainer.encode(load_items(args, args.dataset))
        batches = epoch_batches(args, encoded)
        by_length = sorted(batches, key=lambda b: b[0]["token_ids"].shape[-1])
        n = len(by_length)
        if n < 2:
            raise ValueError(f"only {n} full batches of {args.batch_size}; use more items")
        timed = [
            by_length[min(n - 1, int((k + 0.5) * n / args.repeats))] for k in range(args.repeats)
        ]
        # Warm-up: the longest batch first (largest buffers), then the median.
        warm = [by_length[-1], by_length[n // 2]] * args.warmup
        sequence = warm[: args.warmup] + timed
        if args.padding == "fixed":
            sequence = [(pad_to(f, args.max_seq_length), labels) for f, labels in sequence]
        if not args.smoke:  # an out-of-memory kill would hit whatever else runs here too
            _, options, length = max(f["token_ids"].shape for f, _ in sequence)
            need = estimated_step_gb(args.batch_size, options, length)
            have = available_gb() - 1.0
            if need > have:
                raise MemoryError(
                    f"a [{args.batch_size}, {options}, {length}] step needs ~{need:.1f} GB, "
                    f"{have:.1f} GB free: pass a smaller --batch_size"
                )
        # The optimizer, schedule and compiled steps fit() builds (AdamW, warm-up +
        # linear decay, the shared TrainingSteps).
        steps = trainer.build_steps(1000)
        feed = iter(sequence)

        def step() -> float:
            features, labels = next(feed)  # numpy, as fit()'s dataset yields them
            sums = steps.train([({k: features[k] for k in FIELDS}, labels)])
            return float(sums["loss_sum"] / sums["examples"])

        timing = time_step(step, args.warmup, args.repeats)
    timed_batches = sequence[args.warmup :]
    real = sum(int(f["padding_mask"].sum()) for f, _ in timed_batches)
    slots = sum(int(f["token_ids"].size) for f, _ in timed_batches)
    seconds = sum(timing["times_s"])
    all_lengths = [b[0]["token_ids"].shape[-1] for b in batches]
    return {
        **timing,
        "items_per_s": round(args.batch_size * args.repeats / seconds, 3),
        "real_tokens_per_s": round(real / seconds, 1),
        "timed_shapes": [list(f["token_ids"].shape) for f, _ in timed_batches],
        "timed_mean_padded_length": round(
            statistics.fmean(f["token_ids"].shape[-1] for f, _ in timed_batches), 1
        ),
        "epoch_mean_padded_length": round(statistics.fmean(all_lengths), 1),
        "timed_padding_fraction": round(1 - real / slots, 3),
        "optimizer": f"{trainer.optimizer_name} (AlbertOptimizer), clip 1.0, lr schedule as fit()",
    }


def available_gb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / GB
    return 0.0


# --------------------------------------------------------------------------- report
def summarize(report: dict[str, Any]) -> None:
    for result in report["results"].values():
        train = result.get("train", {})
        pipe = result.get("pipeline", {})
        dyn = train.get("dynamic", {}).get("items_per_s")
        fixed = train.get("fixed", {}).get("items_per_s")
        summary: dict[str, Any] = {}
        if dyn and fixed:
            summary["dynamic_over_fixed_speedup"] = round(dyn / fixed, 2)
        if dyn and pipe.get("packing_items_per_s"):
            # >1: the input side outruns what a training step consumes.
            summary["packing_over_training"] = round(pipe["packing_items_per_s"] / dyn, 1)
            summary["batching_over_training"] = round(pipe["batching_items_per_s"] / dyn, 1)
        result["summary"] = summary


def markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [
        f"Model: {s['model']}; max_seq_length {s['max_seq_length']}, "
        f"{s['warmup']} warm-up + {s['repeats']} timed steps per measurement; CPU "
        f"{report['machine']['cpu_model']}, {report['machine']['cores']} cores",
        "",
        "| dataset | items | options | item length median / p90 / max | at max_seq_length "
        "| packing items/s | batching items/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for dataset, result in report["results"].items():
        p = result.get("pipeline", {})
        if "item_packed_length" not in p:
            lines.append(f"| {dataset} | pipeline failed: {str(p.get('error'))[:100]} ||||||")
            continue
        q = p["item_packed_length"]
        lines.append(
            f"| {dataset} | {p['items']} | {p['options_per_item']['median']} "
            f"| {q['median']} / {q['p90']} / {q['max']} | {p['items_at_max_seq_length']} "
            f"| {p['packing_items_per_s']:.0f} | {p['batching_items_per_s']:.0f} |"
        )
    lines += [
        "",
        "| dataset | padding | batch | timed S per step | median step s | min s | max s | items/s "
        "| real tokens/s | padding | peak RSS MB | other CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dataset, result in report["results"].items():
        for padding, r in result.get("train", {}).items():
            batch = result.get("batch_size")
            if "items_per_s" not in r:
                error = str(r.get("error", "no result"))[:120].replace("|", "/")
                lines.append(f"| {dataset} | {padding} | {batch} | failed: {error} |||||||||")
                continue
            lengths = "/".join(str(shape[-1]) for shape in r["timed_shapes"])
            lines.append(
                f"| {dataset} | {padding} | {batch} | {lengths} | {r['median_s']:.2f} "
                f"| {r['min_s']:.2f} | {r['max_s']:.2f} | {r['items_per_s']:.2f} "
                f"| {r['real_tokens_per_s']:.0f} "
                f"| {r['timed_padding_fraction']:.0%} | {r['peak_rss_mb']} "
                f"| {fmt(r['other_processes_cpu_fraction'], '.0%')} |"
            )
    lines.append("")
    for dataset, result in report["results"].items():
        shown = ", ".join(f"{k} {v}" for k, v in result.get("summary", {}).items())
        lines.append(f"{dataset}: {shown or 'no ratios (missing measurements)'}")
    lines.append(
        "dynamic_over_fixed_speedup: items/s padded to each batch's longest item over "
        "padded to max_seq_length; *_over_training: input-side items/s over the dynamic "
        "step's (>1: the input keeps up)."
    )
    return "\n".join(lines)


class Finetuning(common.Benchmark):
    name = "finetuning"
    what = (
        "multiple-choice fine-tuning items/s (train step: forward, backward, AdamW), "
        "batches padded to their longest item vs to max_seq_length; input side alone"
    )
    variants = PADDINGS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--datasets", default=",".join(DATASETS))
        parser.add_argument("--data_dir", default=MULTIPLE_CHOICE_DATA)
        parser.add_argument(
            "--batch_size",
            type=int,
            default=None,
            help="items per step (auto per dataset, see --max_step_gb; smoke 2)",
        )
        parser.add_argument(
            "--max_step_gb",
            type=float,
            default=12.0,
            help="auto batch: the fixed-length step's estimated peak RAM must stay under this",
        )
        parser.add_argument("--max_seq_length", type=int, default=512)
        parser.add_argument("--max_qa_length", type=int, default=128)
        parser.add_argument("--repeats", type=int, default=None, help="timed steps (5; smoke 2)")
        parser.add_argument(
            "--warmup", type=int, default=None, help="untimed steps first (2; smoke 1)"
        )
        parser.add_argument(
            "--max_items", type=int, default=None, help="use the first N items (all; smoke 48)"
        )

    def configure(self, args: argparse.Namespace) -> None:
        args.datasets = common.choices(args.datasets, tuple(DATASETS), "dataset")
        if args.batch_size is None and args.smoke:
            args.batch_size = 2
        if args.repeats is None:
            args.repeats = 2 if args.smoke else 5
        if args.warmup is None:
            args.warmup = 1 if args.smoke else 2
        if args.max_items is None and args.smoke:
            args.max_items = 48

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        results: dict[str, Any] = {d: {"train": {}} for d in args.datasets}
        for d in args.datasets:
            batch = args.batch_size or auto_batch_size(args, d)
            options = options_per_item(os.path.join(args.data_dir, DATASETS[d]))
            results[d]["batch_size"] = batch
            results[d]["estimated_fixed_step_gb"] = round(
                estimated_step_gb(batch, options, args.max_seq_length), 1
            )
        return {
            "settings": {
                "model": "tiny (V=1000, H=64, 2 layers)"
                if args.smoke
                else "albert_base_v2 shape (V=30000, E=128, H=768, 12 shared layers), random",
                "batch_size": args.batch_size
                or f"auto: largest of {BATCH_CHOICES} whose fixed-length step needs "
                f"<= {args.max_step_gb} GB (estimated_step_gb)",
                "max_seq_length": args.max_seq_length,
                "max_qa_length": args.max_qa_length,
                "warmup": args.warmup,
                "repeats": args.repeats,
                "max_items": args.max_items,
                "timed_batches": "evenly spaced quantiles of one shuffled epoch's padded lengths",
            },
            "results": results,
        }

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        args.workdir = tempfile.mkdtemp(prefix="albert_finetuning_")
        report["prepared"] = yield Job("prepare", {"batch_size": 1}, "prepare tokenizer")
        if "error" in report["prepared"]:
            raise SystemExit(f"prepare failed: {report['prepared']['error']}")

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for dataset in args.datasets:
            result = report["results"][dataset]
            params = {"dataset": dataset, "batch_size": result["batch_size"]}
            result["pipeline"] = yield Job("pipeline", params, f"pipeline {dataset}")
            for padding in args.variants:
                label = f"train {dataset} {padding}"
                result["train"][padding] = yield Job("train", {**params, "padding": padding}, label)

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        common.pin_threads(args, "tf")
        if job.variant == "prepare":
            return prepare(args)
        if job.variant == "pipeline":
            return measure_pipeline(args)
        if job.variant == "train":
            return measure_training(args)
        raise ValueError(f"unknown job {job.variant!r}")

    def summarize(self, report: dict[str, Any]) -> None:
        summarize(report)

    def table(self, report: dict[str, Any]) -> str:
        return markdown(report)

    def cleanup(self, args: argparse.Namespace) -> None:
        if getattr(args, "workdir", None):
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    common.main(Finetuning())
