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

    python bench/roberta_formats.py --work_dir=/tmp/roberta_formats   # ~1 h on 2 cores

Writes ``bench/results/roberta_formats.json`` and prints a table for
docs/pretraining.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time

from common import SHARED_DATA, machine_info, output_path, publish

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", default="runs/roberta_formats")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--tokens_per_batch", type=int, default=8192)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--dupe_factor", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--output", default=None)
    parser.add_argument("--smoke", action="store_true", help="Write to the temp dir.")
    args = parser.parse_args()
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)
    train, held_out = _split(work)
    seq = f"--max_seq_length={args.max_seq_length}"

    tokenizer = os.path.join(work, "tokenizer")
    if not os.path.exists(os.path.join(tokenizer, "tokenizer.json")):
        _python(
            "albert_tf.train_tokenizer",
            f"--input={train}",
            f"--output_dir={tokenizer}",
            "--vocab_size=8000",
            log=os.path.join(work, "tokenizer.log"),
        )

    def shards(name: str, text: str, fmt: list[str], dupe: int) -> str:
        out = os.path.join(work, "data", name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if not os.path.exists(os.path.join(out, "metadata.json")):
            _python(
                "albert_tf.create_pretraining_data",
                f"--input={text}",
                f"--tokenizer_dir={tokenizer}",
                f"--output_dir={out}",
                seq,
                f"--dupe_factor={dupe}",
                "--num_shards=4",
                *fmt,
                log=out + ".log",
            )
        return os.path.join(out, "*.tfrecord")

    common_eval = shards("eval_doc_sentences", held_out, FORMATS["doc_sentences"], 1)
    rows = []
    for name in args.formats.split(","):
        fmt = FORMATS[name]
        train_files = shards(f"train_{name}", train, fmt, args.dupe_factor)
        own_eval = shards(f"eval_{name}", held_out, fmt, 1)
        model_dir = os.path.join(work, name)
        seconds = None
        if not os.path.exists(os.path.join(model_dir, "final")):
            seconds = _python(
                "albert_tf.pretrain",
                f"--model_dir={model_dir}",
                f"--train_files={train_files}",
                f"--eval_files={own_eval}",
                f"--tokenizer_dir={tokenizer}",
                seq,
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
        for split, files in (("doc_sentences", common_eval), ("own", own_eval)):
            result = os.path.join(work, f"{name}_{split}.json")
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
        rows.append(
            dict(
                format=name,
                train_seconds=seconds,
                examples_per_second=train_lines[-1].get("examples_per_second"),
                tokens_per_second=tokens,
                held_out_doc_sentences=scores["doc_sentences"],
                held_out_own_format=scores["own"],
            )
        )

    report = {
        "machine": machine_info(),
        "steps": args.steps,
        "tokens_per_batch": args.tokens_per_batch,
        "max_seq_length": args.max_seq_length,
        "model": MODEL,
        "runs": rows,
    }
    lines = [
        f"{args.steps} steps x {args.tokens_per_batch} tokens; held-out DOC-SENTENCES inputs",
        "| format | MLM accuracy | MLM loss | sentence task (own pairs) |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        d, own = r["held_out_doc_sentences"], r["held_out_own_format"]
        task = ""
        if "sop_accuracy" in own and r["format"] in ("segment_pair_nsp", "sop"):
            task = f"{own['sop_accuracy']:.3f} ± {own.get('sop_accuracy_stderr', 0):.3f}"
        lines.append(
            f"| {r['format']} | {d['mlm_accuracy']:.4f} ± {d.get('mlm_accuracy_stderr', 0):.4f} "
            f"| {d['mlm_loss']:.3f} | {task} |"
        )
    publish(report, output_path(args, "roberta_formats"), "\n".join(lines))


if __name__ == "__main__":
    main()
