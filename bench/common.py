"""Plumbing shared by the scripts in ``bench/`` (``pretraining_step.py``, ``serving.py``, …).

Not a benchmark itself: what every script in ``bench/`` shares, so that all
of them pin threads, time steps and isolate measurements the same way —
thread pinning, step timing, the machine summary, running one measurement per
fresh process with one JSON result line on stdout, writing the report, and
the locally trained English SentencePiece tokenizer padded to the model's
vocabulary size.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# The shared data sets live next to the repository (``../shared/data``).
SHARED_DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
MULTIPLE_CHOICE_DATA = os.path.join(SHARED_DATA, "multiple_choice")

__all__ = [
    "MULTIPLE_CHOICE_DATA",
    "RESULT_PREFIX",
    "add_common_flags",
    "build_padded_tokenizer",
    "choices",
    "dir_bytes",
    "fmt",
    "machine_info",
    "model_config",
    "output_path",
    "peak_rss_mb",
    "publish",
    "pin_tf_threads",
    "pin_torch_threads",
    "spawn",
    "summary_stats",
    "thread_env",
    "thread_report",
    "time_step",
    "worker_main",
    "write_report",
]


RESULT_PREFIX = "@@RESULT@@ "


# --------------------------------------------------------------------------- threads
def thread_env(cores: int, inter_op: int, omp_wait_policy: str) -> dict[str, str]:
    """Environment every worker starts with (set before TF/torch load)."""
    env = {
        "OMP_NUM_THREADS": str(cores),
        "MKL_NUM_THREADS": str(cores),
        "TF_NUM_INTRAOP_THREADS": str(cores),
        "TF_NUM_INTEROP_THREADS": str(inter_op),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
        # Inductor compiles in-process: no worker pool competing for the
        # cores or outliving a killed worker.
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }
    # torch (and Inductor's C++) run on GNU OpenMP, whose default spin-waiting
    # collapses when anything else wants a core: a 256² fp32 matmul on 2 busy
    # cores ran at 2.8 GFLOP/s spinning vs 103 passive. TF's Eigen pool is
    # not affected (it does not use OpenMP).
    if omp_wait_policy != "default":
        env["OMP_WAIT_POLICY"] = omp_wait_policy
    return env


def pin_tf_threads(cores: int, inter_op: int) -> None:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(cores)
    tf.config.threading.set_inter_op_parallelism_threads(inter_op)


def pin_torch_threads(cores: int, inter_op: int) -> None:
    import torch

    torch.set_num_threads(cores)
    torch.set_num_interop_threads(inter_op)


# --------------------------------------------------------------------------- timing
def _cpu_busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def time_step(step: Callable[[], float], warmup: int, repeats: int) -> dict[str, Any]:
    """Seconds per call of ``step`` (which must force its result).

    Also reports how busy the CPUs were with *other* processes while timing
    (0 = machine was ours alone), since a shared machine skews the figures.
    """
    start = time.perf_counter()
    first_loss = step()
    first = time.perf_counter() - start
    for _ in range(warmup - 1):
        step()
    busy0, total0 = _cpu_busy_jiffies()
    own0 = sum(os.times()[:2])
    window_start = time.perf_counter()
    times, loss = [], first_loss
    for _ in range(repeats):
        start = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - start)
    busy1, total1 = _cpu_busy_jiffies()
    own = sum(os.times()[:2]) - own0
    hz = os.sysconf("SC_CLK_TCK")
    other = max(0.0, (busy1 - busy0) / hz - own) / max((total1 - total0) / hz, 1e-9)
    # Jiffies are 10 ms: a shorter window (smoke shapes) says nothing.
    reliable = time.perf_counter() - window_start >= 1.0
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "times_s": [round(t, 4) for t in times],
        "first_step_s": round(first, 3),
        "warmup": warmup,
        "repeats": repeats,
        "loss_first_step": round(first_loss, 4),
        "loss_last_step": round(loss, 4),
        "other_processes_cpu_fraction": round(other, 3) if reliable else None,
    }


def machine_info() -> dict[str, Any]:
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    versions = {}
    for package in ("tensorflow", "keras", "keras-hub", "torch", "transformers", "numpy"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    # The flags that decide each precision's speed, and whether TensorFlow's int8
    # kernels run at all (albert_tf.hardware; imported here, not at the top, so that
    # the peers' worker processes need not import albert_tf).
    from albert_tf.hardware import PRECISION_CPU_FLAGS

    return {
        "cpu_model": model,
        "cpu_flags": sorted(f for f in PRECISION_CPU_FLAGS if f in flags),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "versions": versions,
    }


# --------------------------------------------------------------------------- flags
def add_common_flags(parser: argparse.ArgumentParser) -> None:
    """Flags every script and its workers share."""
    parser.add_argument("--smoke", action="store_true", help="tiny shapes: checks the plumbing")
    parser.add_argument("--output", default=None, help="JSON report path")
    parser.add_argument(
        "--inter_op_threads",
        type=int,
        default=1,
        # One op at a time, each on every core: a second op beside a big
        # matmul only oversubscribes 2 cores.
        help="TF inter-op / torch inter-op threads (1)",
    )
    parser.add_argument(
        "--omp_wait_policy",
        default="PASSIVE",
        choices=("PASSIVE", "ACTIVE", "default"),
        help="OMP_WAIT_POLICY for torch's OpenMP (PASSIVE: robust to other load)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per worker process")
    parser.add_argument("--worker", help=argparse.SUPPRESS)


def choices(text: str, allowed: Sequence[str], what: str) -> list[str]:
    """A comma-separated list of names, each one of ``allowed``."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in allowed:
            raise SystemExit(f"unknown {what} {name!r}; choose from {', '.join(allowed)}")
    return names


def output_path(args: argparse.Namespace, name: str) -> str:
    """``bench/results/<name>.json``; smoke runs go to the temp dir so they
    never replace real figures."""
    if args.output:
        return args.output
    if args.smoke:
        return os.path.join(tempfile.gettempdir(), f"{name}_smoke.json")
    return os.path.join(HERE, "results", f"{name}.json")


def thread_report(args: argparse.Namespace) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    return {
        **thread_env(cores, args.inter_op_threads, args.omp_wait_policy),
        "tf_intra_op": cores,
        "tf_inter_op": args.inter_op_threads,
        "torch_threads": cores,
        "torch_interop": args.inter_op_threads,
    }


def write_report(report: dict[str, Any], path: str) -> None:
    from albert_tf.storage import write_json_atomic

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json_atomic(path, report)  # a killed run leaves the previous report whole


def publish(report: dict[str, Any], path: str, table: str) -> None:
    """The end of every benchmark: the report written, its table printed."""
    write_report(report, path)
    print(table)
    print(f"\nwrote {path}")


# --------------------------------------------------------------------------- processes
def worker_env(args: argparse.Namespace) -> dict[str, str]:
    cores = os.cpu_count() or 1
    env = {**os.environ, **thread_env(cores, args.inter_op_threads, args.omp_wait_policy)}
    if args.omp_wait_policy == "default":
        env.pop("OMP_WAIT_POLICY", None)
    return env


def spawn(script: str, worker_args: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    """Runs ``script --worker ...`` in a fresh process; returns its JSON line, never raises.

    A fresh process per measurement: no TF graph, allocator state or torch
    thread pool carries over from one variant to the next.
    """
    cmd = [
        sys.executable,
        os.path.abspath(script),
        *worker_args,
        "--inter_op_threads",
        str(args.inter_op_threads),
        "--omp_wait_policy",
        args.omp_wait_policy,
    ] + (["--smoke"] if args.smoke else [])
    load = [round(x, 2) for x in os.getloadavg()]
    start = time.perf_counter()
    # Own session, so a timeout kills the worker and anything it started.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=worker_env(args),
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        stderr += f"\n[killed after --timeout={args.timeout}s]"
    lines = [ln for ln in stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    result = json.loads(lines[-1][len(RESULT_PREFIX) :]) if lines else {}
    if proc.returncode != 0 and "error" not in result:
        result["error"] = f"worker exited with {proc.returncode}"
    if proc.returncode != 0:
        result["stderr_tail"] = stderr.strip().splitlines()[-20:]
    result["load_average_before"] = load
    result["process_wall_s"] = round(time.perf_counter() - start, 1)
    return result


def worker_main(run: Callable[[], dict[str, Any]]) -> None:
    """Runs a worker body and prints its one result line (errors included)."""
    try:
        result = run()
        code = 0
    except Exception as e:  # reported to the orchestrator, which carries on
        tail = traceback.format_exc().splitlines()[-15:]
        result = {"error": f"{type(e).__name__}: {e}"[:2000], "traceback_tail": tail}
        code = 1
    result.setdefault("peak_rss_mb", peak_rss_mb())
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def peak_rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


# --------------------------------------------------------------------------- misc
def fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def dir_bytes(path: str) -> int:
    """Apparent size of every file under ``path`` (a file: its size)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def summary_stats(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "min": ordered[0],
        "median": statistics.median(ordered),
        "p90": quantile(0.9),
        "max": ordered[-1],
        "mean": round(statistics.fmean(ordered), 1),
    }


# --------------------------------------------------------------------------- tokenizer
def model_config(smoke: bool):
    """ALBERT-base (V=30000, E=128, H=768, 12 shared layers); tiny with ``smoke``."""
    import albert_tf

    if smoke:
        return albert_tf.AlbertConfig(
            vocab_size=1000,
            embedding_size=16,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
        )
    return albert_tf.get_preset("albert_base_v2")


def build_padded_tokenizer(out_dir: str, vocab_size: int, smoke: bool) -> dict[str, Any]:
    """Trains English SentencePiece on the in-repo sample, padded to ``vocab_size``.

    The ~52k-word sample supports only ~4.4k unigram pieces, but the
    benchmarks want ALBERT's V=30000 (the embedding table and the exported
    model's size depend on it). So the trained model is extended with
    ``CONTROL`` pieces: SentencePiece never emits those, so tokenisation is
    exactly the trained model's, while the piece count (what the package and
    Hugging Face read as the vocabulary size) is ``vocab_size``.
    """
    import itertools

    from albert_tf.data import iter_sentences, sample_path
    from albert_tf.tokenizers import SentencePieceTokenizer, train_sentencepiece
    from albert_tf.tokenizers.sentencepiece_proto import CONTROL, piece_entry

    sentences = iter_sentences([sample_path("en")])
    if smoke:  # fewer pieces, faster training; still a real tokenizer
        sentences = itertools.islice(sentences, 1200)
    start = time.perf_counter()
    trained = train_sentencepiece(
        list(sentences),
        os.path.join(out_dir, "_trained"),
        vocab_size=700 if smoke else vocab_size,
        shrink_vocab=True,  # take the largest vocabulary the sample supports
    )
    trained_pieces = trained.vocabulary_size
    if trained_pieces > vocab_size:
        raise ValueError(f"trained {trained_pieces} pieces, more than vocab_size={vocab_size}")
    padding = b"".join(
        piece_entry(f"[unused{i}]", 0.0, CONTROL) for i in range(trained_pieces, vocab_size)
    )
    tokenizer = SentencePieceTokenizer(trained._model_proto + padding, **trained.options)
    tokenizer.save(out_dir)
    return {
        "kind": "sentencepiece (unigram), trained on albert_tf/data/sample/en_sample.jsonl",
        "trained_pieces": trained_pieces,
        "vocab_size": tokenizer.vocabulary_size,
        "padding": f"{vocab_size - trained_pieces} CONTROL pieces appended (never emitted)",
        "train_s": round(time.perf_counter() - start, 1),
    }
