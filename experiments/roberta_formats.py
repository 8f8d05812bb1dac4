"""RoBERTa's input-format comparison (its Table 2) at our small scale.

Four small ALBERTs, identical but for the input format they pretrain on, each
for the same number of steps of the same token budget (``--tokens_per_batch``),
on the shared English corpora:

* ``segment_pair_nsp``: pairs of multi-sentence segments with NSP (BERT's input);
* ``sop``: the same pairs with ALBERT's sentence-order prediction;
* ``full_sentences``: single segments packed across document boundaries, no
  sentence task;
* ``doc_sentences``: single segments that stay within one document, no sentence task.

Every model is then scored on the same held-out documents, packed as
DOC-SENTENCES (MLM accuracy and loss, with standard errors), and the pair models
also on their own task's held-out pairs. Every 20th document of each corpus
is held out.

    python -m experiments.roberta_formats --work_dir=runs/roberta_formats   # ~1 h on 2 cores
    python -m experiments.roberta_formats --smoke   # 20 steps, dupe factor 1, temp work dir

The work directory keeps the tokenizer, the shards and the trained models: a
second run with the same ``--work_dir`` reuses them. Writes
``experiments/results/roberta_formats.json`` and prints a table for
docs/pretraining.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import experiments
from bench import common
from bench.common import SHARED_DATA, Job, Steps

CORPORA = ["en_austen", "en_sotu", "en_web_bible"]
FORMATS = {
    "segment_pair_nsp": ["--sentence_task=nsp"],
    "sop": ["--sentence_task=sop"],
    "full_sentences": ["--sentence_task=none", "--packing=full_sentences"],
    "doc_sentences": ["--sentence_task=none", "--packing=doc_sentences"],
}
MODEL = [
    "--preset=albert_base_v2",
    "--embedding_size=64",
    "--hidden_size=128",
    "--num_hidden_layers=4",
    "--num_attention_heads=2",
    "--intermediate_size=512",
    "--learning_rate=0.005",
    "--log_every_steps=25",
    "--num_eval_steps=0",
    "--progress_bar=false",
]


def _python(*args: str, log: str) -> float:
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.call([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        with open(log) as f:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({code}):\n{f.read()[-3000:]}")
    return time.monotonic() - started


def _split(work: str) -> tuple[str, str]:
    """Every 20th document of each corpus held out."""
    train, held_out = os.path.join(work, "train.jsonl"), os.path.join(work, "eval.jsonl")
    if not os.path.exists(held_out):
        with open(train + ".tmp", "w") as t, open(held_out + ".tmp", "w") as e:
            for name in CORPORA:
                with gzip.open(os.path.join(SHARED_DATA, "corpus", f"{name}.jsonl.gz"), "rt") as f:
                    for index, line in enumerate(f):
                        (e if index % 20 == 19 else t).write(line)
        os.replace(train + ".tmp", train)
        os.replace(held_out + ".tmp", held_out)
    return train, held_out


def _shards(args: argparse.Namespace, name: str, text: str, fmt: list[str], dupe: int) -> str:
    """``name``'s pretraining shards of ``text`` in format ``fmt`` (made once)."""
    out = os.path.join(args.work, "data", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if not os.path.exists(os.path.join(out, "metadata.json")):
        _python(
            "albert_tf.create_pretraining_data",
            f"--input={text}",
            f"--tokenizer_dir={args.tokenizer}",
            f"--output_dir={out}",
            f"--max_seq_length={args.max_seq_length}",
            f"--dupe_factor={dupe}",
            "--num_shards=4",
            *fmt,
            log=out + ".log",
        )
    return os.path.join(out, "*.tfrecord")


def train_and_score(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """One format: its shards, its model (trained once), both held-out scores."""
    fmt = FORMATS[name]
    train_files = _shards(args, f"train_{name}", args.train, fmt, args.dupe_factor)
    own_eval = _shards(args, f"eval_{name}", args.held_out, fmt, 1)
    model_dir = os.path.join(args.work, name)
    seconds = None
    if not os.path.exists(os.path.join(model_dir, "final")):
        seconds = _python(
            "albert_tf.pretrain",
            f"--model_dir={model_dir}",
            f"--train_files={train_files}",
            f"--eval_files={own_eval}",
            f"--tokenizer_dir={args.tokenizer}",
            f"--max_seq_length={args.max_seq_length}",
            f"--tokens_per_batch={args.tokens_per_batch}",
            f"--num_train_steps={args.steps}",
            f"--num_warmup_steps={max(1, min(100, args.steps // 8))}",
            f"--save_checkpoints_steps={args.steps}",
            f"--eval_every_steps={args.steps}",
            fmt[0],
            *MODEL,
            log=model_dir + ".log",
        )
    scores = {}
    for split, files in (("doc_sentences", args.common_eval), ("own", own_eval)):
        result = os.path.join(args.work, f"{name}_{split}.json")
        _python(
            "albert_tf.evaluate_pretraining",
            f"--model={model_dir}/final",
            f"--eval_files={files}",
            f"--output={result}",
            log=result + ".log",
        )
        with open(result) as f:
            scores[split] = json.load(f)
    with open(os.path.join(model_dir, "metrics.jsonl")) as f:
        train_lines = [json.loads(x) for x in f if '"train"' in x]
    tokens = sum(r.get("tokens_per_second", 0) for r in train_lines[-1:])
    return dict(
        format=name,
        train_seconds=seconds,
        examples_per_second=train_lines[-1].get("examples_per_second"),
        tokens_per_second=tokens,
        held_out_doc_sentences=scores["doc_sentences"],
        held_out_own_format=scores["own"],
    )


class RobertaFormats(common.Benchmark):
    name = "roberta_formats"
    what = "RoBERTa's input-format comparison (its Table 2) at equal tokens, small ALBERTs"
    variants = tuple(FORMATS)
    isolated = False  # every step is a `python -m albert_tf.<command>` process of its own
    results_dir = experiments.RESULTS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--work_dir", default=None, help="runs/roberta_formats (smoke: a temp dir)"
        )
        parser.add_argument("--steps", type=int, default=None, help="800 (smoke 20)")
        parser.add_argument("--tokens_per_batch", type=int, default=8192)
        parser.add_argument("--max_seq_length", type=int, default=128)
        parser.add_argument("--dupe_factor", type=int, default=None, help="3 (smoke 1)")

    def configure(self, args: argparse.Namespace) -> None:
        smoke = args.smoke
        args.steps = args.steps or (20 if smoke else 800)
        args.dupe_factor = args.dupe_factor or (1 if smoke else 3)
        # Never a smoke run's models in the real work directory: they would be reused.
        work_dir = args.work_dir or (
            tempfile.mkdtemp(prefix="roberta_formats_") if smoke else "runs/roberta_formats"
        )
        # As given (relative to where it runs): the report records paths under it.
        args.work = work_dir

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "steps": args.steps,
            "tokens_per_batch": args.tokens_per_batch,
            "max_seq_length": args.max_seq_length,
            "model": MODEL,
            "runs": [],
        }

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> None:
        os.makedirs(args.work, exist_ok=True)
        args.train, args.held_out = _split(args.work)
        args.tokenizer = os.path.join(args.work, "tokenizer")
        if not os.path.exists(os.path.join(args.tokenizer, "tokenizer.json")):
            _python(
                "albert_tf.train_tokenizer",
                f"--input={args.train}",
                f"--output_dir={args.tokenizer}",
                "--vocab_size=8000",
                log=os.path.join(args.work, "tokenizer.log"),
            )
        held_out = FORMATS["doc_sentences"]
        args.common_eval = _shards(args, "eval_doc_sentences", args.held_out, held_out, 1)

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for name in args.variants:
            report["runs"].append((yield Job(name)))

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        return train_and_score(args, job.variant)

    def table(self, report: dict[str, Any]) -> str:
        lines = [
            f"{report['steps']} steps x {report['tokens_per_batch']} tokens; "
            "held-out DOC-SENTENCES inputs",
            "| format | MLM accuracy | MLM loss | sentence task (own pairs) |",
            "| --- | --- | --- | --- |",
        ]
        for r in report["runs"]:
            d, own = r["held_out_doc_sentences"], r["held_out_own_format"]
            task = ""
            if "sop_accuracy" in own and r["format"] in ("segment_pair_nsp", "sop"):
                task = f"{own['sop_accuracy']:.3f} ± {own.get('sop_accuracy_stderr', 0):.3f}"
            lines.append(
                f"| {r['format']} | {d['mlm_accuracy']:.4f} "
                f"± {d.get('mlm_accuracy_stderr', 0):.4f} | {d['mlm_loss']:.3f} | {task} |"
            )
        return "\n".join(lines)


if __name__ == "__main__":
    common.main(RobertaFormats())
