"""Pretraining-data preparation at growing corpus sizes: peak memory and speed.

For the shared English corpora (SOTU, Austen, World English Bible: 20 MB of
JSON Lines) and the Chinese ones (People's Daily 1998, LibreOffice help:
7 MB), repeated 1×, 4× and 16× into one uncompressed file each:

* **peak RSS** of ``python -m albert_tf.create_pretraining_data`` (one fresh
  process each, ``--num_workers=1 --dupe_factor=1 --max_seq_length=128``,
  one TensorFlow thread), read from the kernel's rusage of that process;
* **MB/s per core** of input file (the preparation's own time, without the
  process start-up), and the same for the **tokenizer alone**
  on the same text (sentences already in memory, batches of 2,048: the
  physical floor of this step), and their ratio;
* at 1×, the same preparation through **Apache Beam's DirectRunner**
  (when ``pip install -e ".[beam]"`` is installed), checked to write the
  local path's shards byte for byte;
* at 1× and ``--paired_scale`` (4×), the **throughput ratios** that count: the tokenizer
  alone, the local preparation and the Beam DirectRunner alternated ``--rounds`` times
  in one process (medians), so that the machine's other load weighs on all
  three alike; at 4× and **marginal** (from the differences 4× − 1×, which
  cancel each call's fixed costs: the rate on a corpus-sized input);
* the **input pipeline through tf.data service** (a dispatcher and one
  worker on loopback, in a worker process) against the in-process pipeline,
  in batches per second, over the 1× English shards.

The tokenizers (8,000 pieces: SentencePiece for English, WordPiece for
Chinese) are trained once on the 1× text, outside the timings. Writes
``bench/results/data_prep.json`` and prints a markdown table::

    python -m bench.data_prep                      # ~21 min on 2 cores
    python -m bench.data_prep --scales=1,4 --languages=en
    python -m bench.data_prep --parts=paired       # the throughput ratios only (~10 min)
    python -m bench.data_prep --smoke              # the in-repo samples, plumbing only

Every measurement runs in a fresh process of its own (the command, or a
``python -c`` snippet), so the runner's jobs run in this process
(``isolated = False``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench import common
from bench.common import REPO, RESULT_PREFIX, SHARED_DATA, Job, Steps, fmt

CORPORA = {
    "en": ["en_sotu.jsonl.gz", "en_austen.jsonl.gz", "en_web_bible.jsonl.gz"],
    "zh": ["zh_peoples_daily_1998.jsonl.gz", "zh_libreoffice_help.jsonl.gz"],
}
TOKENIZER_KIND = {"en": "sentencepiece", "zh": "wordpiece"}
# One core, as the issue's "per core" figures ask; the tokenizer baseline too.
ONE_THREAD = {
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "CUDA_VISIBLE_DEVICES": "",
}


def _env() -> dict[str, str]:
    return {**os.environ, **ONE_THREAD, "PYTHONPATH": REPO}


def build_corpus(lang: str, work: str, smoke: bool) -> str:
    """The 1× corpus as one uncompressed JSON Lines file."""
    path = os.path.join(work, f"{lang}_x1.jsonl")
    with open(path, "wb") as out:
        if smoke:
            sample = os.path.join(REPO, "albert_tf", "data", "sample", f"{lang}_sample.jsonl")
            with open(sample, "rb") as fh:
                shutil.copyfileobj(fh, out)
            return path
        for name in CORPORA[lang]:
            with gzip.open(os.path.join(SHARED_DATA, "corpus", name), "rb") as fh:
                shutil.copyfileobj(fh, out)
    return path


def repeat(path: str, times: int) -> str:
    if times == 1:
        return path
    out_path = path.replace("_x1.", f"_x{times}.")
    with open(out_path, "wb") as out:
        for _ in range(times):
            with open(path, "rb") as fh:
                shutil.copyfileobj(fh, out)
    return out_path


def train_tokenizer(lang: str, corpus: str, out: str, smoke: bool) -> None:
    code = f"""
import itertools
from albert_tf.data import iter_sentences
from albert_tf.tokenizers import train_sentencepiece, train_wordpiece
sentences = list(itertools.islice(iter_sentences([{corpus!r}]), 300_000))
train = train_sentencepiece if {TOKENIZER_KIND[lang]!r} == "sentencepiece" else train_wordpiece
train(sentences, {out!r}, vocab_size={2000 if smoke else 8000})
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), cwd=REPO)


def run_python(args: list[str], env: dict[str, str] | None = None) -> tuple[dict, str, float]:
    """Runs ``python *args``: its last ``RESULT_PREFIX`` line as JSON ({} if none),
    its stderr and its wall time. Every measurement here runs in a fresh process."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env or _env(), cwd=REPO
    )
    wall = time.perf_counter() - start
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    return (json.loads(lines[-1][len(RESULT_PREFIX) :]) if lines else {}), out.stderr, wall


# Runs the command in argv and reports that child's own peak RSS (wait4's
# rusage: this process alone, not the maximum over all children).
_PEAK_RSS = f"""
import json, os, subprocess, sys
p = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(p.pid, 0)
print({RESULT_PREFIX!r} + json.dumps({{"peak_rss_mb": usage.ru_maxrss / 1024,
      "status": os.waitstatus_to_exitcode(status)}}), flush=True)
"""


def prepare(corpus: str, tokenizer: str, out: str, extra: list[str] | None = None) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "albert_tf.create_pretraining_data",
        f"--input={corpus}",
        f"--tokenizer_dir={tokenizer}",
        f"--output_dir={out}",
        "--num_workers=1",
        "--dupe_factor=1",
        "--max_seq_length=128",
        "--num_shards=4",
        *(extra or []),
    ]
    info, stderr, wall = run_python(["-c", _PEAK_RSS, *cmd])
    mb = os.path.getsize(corpus) / 1e6
    report = {
        "input_mb": round(mb, 1),
        "process_wall_s": round(wall, 1),
        "peak_rss_mb": round(info.get("peak_rss_mb", float("nan")), 1),
    }
    if info.get("status", 1) != 0:
        report["error"] = stderr[-2000:]
        return report
    meta = json.load(open(os.path.join(out, "metadata.json")))  # noqa: SIM115
    seconds = meta["summary"]["seconds"]
    report.update(
        # The preparation's own time (as it reports it): without the process's
        # start-up (importing TensorFlow), a fixed cost whatever the corpus.
        prepare_s=seconds,
        mb_per_s=round(mb / seconds, 3),
        documents=meta["summary"]["documents"],
        examples=meta["summary"]["examples"],
        tasks=meta["summary"]["tasks"],
    )
    return report


def tokenizer_speed(corpus: str, tokenizer: str) -> dict[str, Any]:
    """The tokenizer alone on the same sentences, in one thread."""
    code = f"""
import json, time
from albert_tf.data import read_documents
from albert_tf.tokenizers import load_tokenizer
tok = load_tokenizer({tokenizer!r})
sentences = [s for d in read_documents({corpus!r}) for s in d]
nbytes = sum(len(s.encode()) for s in sentences)
batches = [sentences[i:i + 2048] for i in range(0, len(sentences), 2048)]
tok.tokenize_on_host(batches[0])
start = time.perf_counter()
pieces = 0
for b in batches:
    pieces += len(tok.tokenize_on_host(b)[0])
wall = time.perf_counter() - start
print({RESULT_PREFIX!r} + json.dumps({{"text_mb": nbytes / 1e6, "wall_s": wall,
      "pieces": pieces}}))
"""
    r, stderr, _ = run_python(["-c", code])
    if not r:
        return {"error": stderr[-2000:]}
    # Per MB of *input file* (JSON included), so it compares with prepare's MB/s.
    file_mb = os.path.getsize(corpus) / 1e6
    return {
        "sentence_text_mb": round(r["text_mb"], 1),
        "wall_s": round(r["wall_s"], 1),
        "mb_per_s": round(file_mb / r["wall_s"], 3),
        "pieces": r["pieces"],
    }


def paired_speed(corpora: dict[int, str], tokenizer: str, work: str, rounds: int) -> dict[str, Any]:
    """Throughput ratios measured in one process, alternating: the tokenizer
    alone on the corpus's sentences (in memory, batches of 2,048), the local
    preparation, and (when installed) the Beam DirectRunner, ``rounds`` times
    each on each corpus of ``corpora`` (repeats → file); medians. Alternating
    evens out what else the machine is doing.

    Each call pays fixed costs whatever the input (tracing the tokenizer,
    planning, writing metadata; Beam's pipeline set-up), so beside the ratios
    at the largest corpus the result gives the **marginal** ones, from the
    differences between the largest and the smallest corpus: the rates at
    which a corpus-sized input is processed."""
    code = f"""
import json, shutil, statistics, time
from albert_tf.data import read_documents
from albert_tf.data.shards import write_pretraining_data
from albert_tf.tokenizers import load_tokenizer
import importlib.util
# Only a missing apache-beam skips the Beam figures; any other import error fails loudly.
if importlib.util.find_spec("apache_beam") is not None:
    from albert_tf.data.shards.beam import run_beam_pipeline
else:
    run_beam_pipeline = None
tok = load_tokenizer({tokenizer!r})
corpora = {corpora!r}
sentences = {{k: [s for d in read_documents(p) for s in d] for k, p in corpora.items()}}
tok.tokenize_on_host(sentences[min(corpora)][:8])
times = {{k: {{"tokenizer": [], "local": [], "beam": []}} for k in corpora}}
for _ in range({rounds}):
    for scale, corpus in corpora.items():
        common = dict(output_dir={work!r} + "/paired", inputs=[corpus], max_seq_length=128,
                      dupe_factor=1, num_shards=4, log=None)
        start = time.perf_counter()
        batch = sentences[scale]
        for i in range(0, len(batch), 2048):
            tok.tokenize_on_host(batch[i:i + 2048])
        times[scale]["tokenizer"].append(time.perf_counter() - start)
        start = time.perf_counter()
        write_pretraining_data(tokenizer={tokenizer!r}, show_progress=False, **common)
        times[scale]["local"].append(time.perf_counter() - start)
        shutil.rmtree(common["output_dir"])
        if run_beam_pipeline is not None:
            start = time.perf_counter()
            run_beam_pipeline(tokenizer_dir={tokenizer!r}, **common)
            times[scale]["beam"].append(time.perf_counter() - start)
            shutil.rmtree(common["output_dir"])
print({RESULT_PREFIX!r} + json.dumps(times))
"""
    times, stderr, _ = run_python(["-c", code])
    if not times:
        return {"error": stderr[-3000:]}
    per_scale: dict[str, Any] = {}
    medians: dict[str, dict[str, float]] = {}
    sizes: dict[str, float] = {}
    for scale, path in corpora.items():
        key = str(scale)
        sizes[key] = os.path.getsize(path) / 1e6
        medians[key] = {k: statistics.median(v) for k, v in times[key].items() if v}
        per_scale[f"x{scale}"] = {
            "input_mb": round(sizes[key], 1),
            "seconds": times[key],
            **_rates(sizes[key], medians[key]),
        }
    small, large = str(min(corpora)), str(max(corpora))
    result: dict[str, Any] = {"rounds": rounds, **per_scale[f"x{large}"], "scale": int(large)}
    result["at_scale"] = per_scale
    if small != large:
        seconds = {k: medians[large][k] - medians[small][k] for k in medians[large]}
        result["marginal"] = {
            "from": f"x{small}",
            "to": f"x{large}",
            **_rates(sizes[large] - sizes[small], seconds),
        }
    return result


def _rates(mb: float, seconds: dict[str, float]) -> dict[str, float]:
    """MB/s of each measured path over ``mb`` of input, and the local and Beam
    paths' throughput as a fraction of the tokenizer's."""
    rates = {f"{name}_mb_per_s": round(mb / s, 3) for name, s in seconds.items()}
    for name in ("local", "beam"):
        if name in seconds:
            rates[f"{name}_vs_tokenizer"] = round(seconds["tokenizer"] / seconds[name], 3)
    return rates


def beam_prepare(corpus: str, tokenizer: str, out: str) -> dict[str, Any]:
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        return {"skipped": "apache-beam is not installed (pip install -e '.[beam]')"}
    return prepare(corpus, tokenizer, out, ["--runner=DirectRunner"])


def shard_bytes(directory: str) -> dict[str, bytes]:
    """The shard files of a preparation, by name."""
    import glob

    files = sorted(glob.glob(os.path.join(directory, "pretrain-*.tfrecord")))
    return {os.path.basename(f): open(f, "rb").read() for f in files}  # noqa: SIM115


def input_pipeline_speed(shards: str, batches: int) -> dict[str, Any]:
    """Batches per second of the pretraining input, in process and through a
    tf.data service dispatcher + worker on loopback (in one worker process)."""
    code = f"""
import json, time
import tensorflow as tf
from albert_tf.data.pipeline import pretraining_dataset
files = tf.io.gfile.glob({shards!r} + "/pretrain-*.tfrecord")
def rate(**kw):
    ds = pretraining_dataset(files, batch_size=64, max_seq_length=128, **kw)
    it = iter(ds)
    for _ in range(5):
        next(it)
    start = time.perf_counter()
    for _ in range({batches}):
        next(it)
    return {batches} / (time.perf_counter() - start)
result = {{"in_process_batches_per_s": rate()}}
dispatcher = tf.data.experimental.service.DispatchServer()
address = dispatcher.target.split("://")[1]
worker = tf.data.experimental.service.WorkerServer(
    tf.data.experimental.service.WorkerConfig(dispatcher_address=address))
result["data_service_batches_per_s"] = rate(data_service=dispatcher.target)
print({RESULT_PREFIX!r} + json.dumps(result))
"""
    env = {**_env(), "TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "2"}
    r, stderr, _ = run_python(["-c", code], env)
    if not r:
        return {"error": stderr[-3000:]}
    r = {k: round(v, 2) for k, v in r.items()}
    r["service_vs_in_process"] = round(
        r["data_service_batches_per_s"] / r["in_process_batches_per_s"], 3
    )
    return r


def table(report: dict[str, Any]) -> str:
    lines = [
        "| corpus | input MB | peak RSS MB | RSS vs 1× | prepare MB/s/core | tokenizer MB/s | "
        "prepare / tokenizer | examples |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lang, runs in report["results"].items():
        base = runs.get("x1", {}).get("peak_rss_mb")
        for scale, r in runs.items():
            if not scale.startswith("x"):
                continue
            tok = r.get("tokenizer", {})
            lines.append(
                f"| {lang} {scale} | {fmt(r.get('input_mb'), '.1f')} | "
                f"{fmt(r.get('peak_rss_mb'), '.0f')} | "
                f"{fmt(r['peak_rss_mb'] / base if base and 'peak_rss_mb' in r else None, '.3f')} | "
                f"{fmt(r.get('mb_per_s'), '.3f')} | {fmt(tok.get('mb_per_s'), '.3f')} | "
                f"{fmt(r['mb_per_s'] / tok['mb_per_s'] if tok.get('mb_per_s') else None, '.2f')} | "
                f"{r.get('examples', '-')} |"
            )
        beam = runs.get("beam")
        x1_tokenizer = runs.get("x1", {}).get("tokenizer", {}).get("mb_per_s")
        if beam and "mb_per_s" in beam:
            lines.append(
                f"| {lang} x1, Beam DirectRunner | {fmt(beam['input_mb'], '.1f')} | "
                f"{fmt(beam.get('peak_rss_mb'), '.0f')} | | {fmt(beam['mb_per_s'], '.3f')} | | "
                f"{fmt(beam['mb_per_s'] / x1_tokenizer if x1_tokenizer else None, '.2f')} | "
                f"same shards: {beam.get('same_shards')} |"
            )
    lines += ["", "Against the tokenizer alone, alternated in one process (medians):", ""]
    lines += [
        "| corpus | tokenizer MB/s | local MB/s | local / tokenizer | Beam MB/s | "
        "Beam / tokenizer |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for lang, runs in report["results"].items():
        p = runs.get("paired", {})
        rows = [(f"x{p.get('scale', 1)}", p)]
        if "marginal" in p:
            m = p["marginal"]
            rows.append((f"marginal, {m['from']} → {m['to']}", m))
        for label, r in rows:
            if "tokenizer_mb_per_s" not in r:
                continue
            lines.append(
                f"| {lang} {label} | {r['tokenizer_mb_per_s']:.3f} | "
                f"{r['local_mb_per_s']:.3f} | "
                f"{r['local_vs_tokenizer']:.2f} | {fmt(r.get('beam_mb_per_s'), '.3f')} | "
                f"{fmt(r.get('beam_vs_tokenizer'), '.2f')} |"
            )
    pipe = report.get("input_pipeline", {})
    if "in_process_batches_per_s" in pipe:
        lines.append("")
        lines.append(
            f"Input pipeline (batch 64 × 128): in process {pipe['in_process_batches_per_s']} "
            f"batches/s; through tf.data service on loopback "
            f"{pipe['data_service_batches_per_s']} ({pipe['service_vs_in_process']:.2f}×)."
        )
    return "\n".join(lines)


class DataPrep(common.Benchmark):
    name = "data_prep"
    what = (
        "peak RSS and MB/s per core of create_pretraining_data at growing corpus sizes, "
        "against the tokenizer alone; Beam DirectRunner; input pipeline via tf.data service"
    )
    isolated = False  # each measurement starts its own process (see the docstring)

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--scales", default="1,4,16")
        parser.add_argument("--languages", default="en,zh")
        parser.add_argument("--pipeline_batches", type=int, default=200)
        parser.add_argument("--rounds", type=int, default=3, help="paired speed rounds")
        parser.add_argument(
            "--paired_scale",
            type=int,
            default=4,
            help="corpus repeats for the paired ratios: per-call costs (loading the "
            "tokenizer, planning, concatenating shards) weigh less on a larger input",
        )
        parser.add_argument(
            "--parts",
            default="scales,beam,paired,pipeline",
            help="what to measure (all by default)",
        )

    def configure(self, args: argparse.Namespace) -> None:
        args.parts = set(args.parts.split(","))
        scales = [int(s) for s in args.scales.split(",")]
        args.scales = scales if "scales" in args.parts else []

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "settings": "num_workers=1, dupe_factor=1, max_seq_length=128, 1 TF thread",
            "results": {},
        }

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> None:
        args.work = tempfile.mkdtemp(prefix="bench_data_prep_")

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        parts, work = args.parts, args.work
        for lang in args.languages.split(","):
            runs: dict[str, Any] = {}
            corpus = yield Job("corpus", {"lang": lang}, f"{lang} corpus and tokenizer")
            base, tokenizer = corpus["base"], corpus["tokenizer"]
            for scale in args.scales:
                params = {"lang": lang, "scale": scale, "base": base, "tokenizer": tokenizer}
                runs[f"x{scale}"] = yield Job("scale", params, f"{lang} x{scale}")
            if "beam" in parts:
                params = {"lang": lang, "base": base, "tokenizer": tokenizer}
                runs["beam"] = yield Job("beam", params, f"{lang} beam")
            if "paired" in parts:
                params = {"base": base, "tokenizer": tokenizer}
                runs["paired"] = yield Job("paired", params, f"{lang} paired")
            if lang == "en" and "pipeline" in parts:
                shards = os.path.join(work, "out_en_1")
                report["input_pipeline"] = yield Job("pipeline", {"shards": shards}, "pipeline")
            report["results"][lang] = runs

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        work = args.work
        if job.variant == "corpus":
            base = build_corpus(args.lang, work, args.smoke)
            tokenizer = os.path.join(work, f"tok_{args.lang}")
            train_tokenizer(args.lang, base, tokenizer, args.smoke)
            if 1 not in args.scales and {"beam", "pipeline"} & args.parts:
                # the 1x shards the Beam check and the input pipeline use
                prepare(base, tokenizer, os.path.join(work, f"out_{args.lang}_1"))
            return {"base": base, "tokenizer": tokenizer}
        if job.variant == "scale":
            corpus = repeat(args.base, args.scale)
            out = os.path.join(work, f"out_{args.lang}_{args.scale}")
            r = prepare(corpus, args.tokenizer, out)
            r["tokenizer"] = tokenizer_speed(corpus, args.tokenizer)
            if args.scale != 1:
                os.remove(corpus)
                shutil.rmtree(out)
            return r
        if job.variant == "beam":
            beam_out = os.path.join(work, f"beam_{args.lang}")
            beam = beam_prepare(args.base, args.tokenizer, beam_out)
            if "mb_per_s" in beam:
                beam["same_shards"] = shard_bytes(beam_out) == shard_bytes(
                    os.path.join(work, f"out_{args.lang}_1")
                )
            return beam
        if job.variant == "paired":
            corpora = {1: args.base, args.paired_scale: repeat(args.base, args.paired_scale)}
            paired = paired_speed(corpora, args.tokenizer, work, args.rounds)
            if corpora[args.paired_scale] != args.base:
                os.remove(corpora[args.paired_scale])
            return paired
        if job.variant == "pipeline":
            return input_pipeline_speed(args.shards, args.pipeline_batches)
        raise ValueError(f"unknown job {job.variant!r}")

    def table(self, report: dict[str, Any]) -> str:
        return table(report)

    def cleanup(self, args: argparse.Namespace) -> None:
        if getattr(args, "work", None):
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    common.main(DataPrep())
