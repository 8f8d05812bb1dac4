"""The one benchmark protocol of ``bench/``, its runner, and the plumbing they share.

Every script in ``bench/`` (and in ``experiments/``) declares a `Benchmark` and
ends with ``if __name__ == "__main__": common.main(TheBenchmark())``. The
protocol's phases:

* **variants**: what is compared (``--variants``, every one by default);
* **prepare**: inputs and models built once, before anything is timed;
* **plan**: the measurements, in order, each a `Job`;
* **measure**: one job, in a fresh worker process (``isolated``) or in the
  runner's own, returning a dict;
* **report**: `Benchmark.summarize` (ratios and the like), `Benchmark.table` (what
  is printed) and ``bench/results/<name>.json``, which always holds the machine
  (CPU model, the CPU flags that decide each precision's speed, versions).

`main` parses the shared flags (``--smoke``, ``--output``, ``--variants``; for
isolated benchmarks the thread and worker flags), drives the phases, rewrites
the report after every measurement (a killed run keeps what it measured) and
prints the table. ``--smoke`` runs tiny shapes to check the plumbing; its report
goes to the temp directory, never over real figures.

The plumbing: thread pinning, step timing, the machine summary, one fresh
process per measurement with one JSON result line on stdout, the report file,
and the locally trained English SentencePiece tokenizer padded to the model's
vocabulary size.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from collections.abc import Callable, Generator, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
# The shared data sets live next to the repository (``../shared/data``).
SHARED_DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
MULTIPLE_CHOICE_DATA = os.path.join(SHARED_DATA, "multiple_choice")

__all__ = [
    "MULTIPLE_CHOICE_DATA",
    "RESULT_PREFIX",
    "Benchmark",
    "Job",
    "Steps",
    "build_padded_tokenizer",
    "choices",
    "dir_bytes",
    "fmt",
    "machine_info",
    "main",
    "model_config",
    "output_path",
    "peak_rss_mb",
    "pin_threads",
    "publish",
    "summary_stats",
    "thread_env",
    "thread_report",
    "time_step",
    "write_report",
]


RESULT_PREFIX = "@@RESULT@@ "


# --------------------------------------------------------------------------- protocol
@dataclasses.dataclass(frozen=True)
class Job:
    """One measurement (or one preparatory step) of a benchmark.

    ``measure`` receives the runner's arguments with ``params`` set on them,
    so ``params`` is what differs between a benchmark's jobs (the precision,
    the workload, warm-up and repeats, ...); an isolated benchmark's params must
    be JSON. ``envs`` (isolated benchmarks): extra environment of the worker
    process; with several, that many workers are started together (one
    multi-process measurement, e.g. two workers of a collective) and the result
    is ``{"processes": [each one's result]}``.
    """

    variant: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    label: str = ""
    envs: tuple[dict[str, str], ...] = ({},)


#: What `Benchmark.prepare` and `Benchmark.plan` are: generators that yield the
#: jobs to run and receive each one's result (``result = yield Job(...)``).
Steps = Generator[Job, dict[str, Any], None]


class Benchmark:
    """What a benchmark declares; `main` runs it.

    Runner side: `add_flags`, `configure`, `header`, `prepare`, `plan`,
    `summarize`, `table`, `cleanup`. Worker side (a fresh process when
    ``isolated``): `measure`. `plan` (and `prepare`, when it runs jobs) stores
    each result in the report itself: ``report["results"][v] = yield Job(v)``;
    it may read what was stored so far to decide what comes next.
    """

    #: ``<results_dir>/<name>.json``.
    name: str = ""
    #: What ``--help`` prints (default: the docstring of the benchmark's module).
    doc: str = ""
    #: The report's ``what``: one sentence on what is measured.
    what: str = ""
    #: The alternatives compared: ``--variants`` (comma-separated; () for no flag).
    variants: tuple[str, ...] = ()
    #: ``--variants`` under ``--smoke`` when it is not given (None: all of them).
    smoke_variants: tuple[str, ...] | None = None
    #: True: each job runs in a fresh worker process, one at a time, threads
    #: pinned alike (`thread_env`); False: in the runner's process.
    isolated: bool = True
    #: Where the report goes (``--smoke``: the temp directory).
    results_dir: str = RESULTS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        """The benchmark's own flags (beside the shared ones)."""

    def configure(self, args: argparse.Namespace) -> None:
        """Defaults that depend on ``--smoke``, checks: once, in the runner."""

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        """The report's fields beside ``what``, ``command``, ``smoke``, ``machine``
        (and ``threads`` when isolated); its own win."""
        return {}

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps | None:
        """Inputs built once. A generator when the building runs as jobs."""
        return None

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        """The measurements, in order; each result stored in ``report``."""
        raise NotImplementedError

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        """One job; ``args`` carries ``job.params``."""
        raise NotImplementedError

    def summarize(self, report: dict[str, Any]) -> None:
        """Figures derived from the results (ratios, ...), in place; after every job."""

    def table(self, report: dict[str, Any]) -> str:
        """What is printed at the end."""
        return json.dumps(report.get("results", report), indent=2)

    def cleanup(self, args: argparse.Namespace) -> None:
        """Always runs at the end (temporary work directories)."""

    def result_name(self, args: argparse.Namespace, report: dict[str, Any]) -> str:
        """The report file's name, without ``.json``."""
        return self.name


def main(benchmark: Benchmark, argv: Sequence[str] | None = None) -> None:
    """Parses the shared and the benchmark's flags, then runs it (or, with
    ``--worker``, one of its jobs)."""
    module = _module_name(benchmark)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=benchmark.doc or sys.modules[type(benchmark).__module__].__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_shared_flags(parser, benchmark)
    benchmark.add_flags(parser)
    if benchmark.isolated:
        worker = argparse.ArgumentParser(add_help=False)
        worker.add_argument("--worker")  # a job from `_spawn`, with the runner's arguments
        payload = worker.parse_known_args(argv)[0].worker
        if payload:
            _run_worker(benchmark, payload)
            return
    args = parser.parse_args(argv)
    if benchmark.variants:
        chosen = args.variants
        if chosen is None:
            chosen = ",".join((args.smoke and benchmark.smoke_variants) or benchmark.variants)
        args.variants = choices(chosen, benchmark.variants, "variant")
    benchmark.configure(args)
    report: dict[str, Any] = {
        "what": benchmark.what,
        "command": ["python", "-m", module, *argv],
        "smoke": args.smoke,
        "machine": machine_info(),
    }
    if benchmark.isolated:
        report["threads"] = thread_report(args)
    report.update(benchmark.header(args))

    def path() -> str:
        return output_path(args, benchmark.result_name(args, report), benchmark.results_dir)

    def measure(job: Job) -> dict[str, Any]:
        if benchmark.isolated:
            return _spawn(module, job, args)
        return benchmark.measure(_with_params(args, job.params), job)

    def drive(steps: Steps | None) -> None:
        if steps is None:
            return
        job = next(steps, None)
        while job is not None:
            label = job.label or job.variant
            print(f"[{label}] ...", file=sys.stderr, flush=True)
            result = measure(job)
            print(f"[{label}] {_brief(result)}", file=sys.stderr, flush=True)
            try:
                job = steps.send(result)  # the benchmark stores the result
            except StopIteration:
                job = None
            finally:
                benchmark.summarize(report)
                write_report(report, path())

    try:
        drive(benchmark.prepare(args, report))
        drive(benchmark.plan(args, report))
    finally:
        benchmark.cleanup(args)
    benchmark.summarize(report)
    publish(report, path(), benchmark.table(report))


def _module_name(benchmark: Benchmark) -> str:
    """``bench.x`` for a benchmark defined in ``python -m bench.x``'s module."""
    name = type(benchmark).__module__
    if name == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        if spec is None:
            raise SystemExit("run it as a module from the repository: python -m bench.<name>")
        name = spec.name
    return name.removesuffix(".__main__")


def _add_shared_flags(parser: argparse.ArgumentParser, benchmark: Benchmark) -> None:
    parser.add_argument("--smoke", action="store_true", help="tiny shapes: checks the plumbing")
    parser.add_argument(
        "--output", default=None, help="JSON report path (default: results/<name>.json)"
    )
    if benchmark.variants:
        smoke = benchmark.smoke_variants
        in_smoke = f"; smoke: {','.join(smoke)}" if smoke else ""
        parser.add_argument(
            "--variants",
            default=None,
            help=f"what to compare, comma-separated, of: {', '.join(benchmark.variants)} "
            f"(default: all{in_smoke})",
        )
    if not benchmark.isolated:
        return
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


def _with_params(args: argparse.Namespace, params: dict[str, Any]) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), **params})


def _brief(result: dict[str, Any]) -> str:
    """One progress line on a job's result."""
    if "processes" in result:
        return "; ".join(_brief(r) for r in result["processes"])
    if "error" in result:
        return f"failed: {str(result['error'])[:300]}"
    if isinstance(result.get("median_s"), float):
        return f"median {result['median_s']:.4g} s"
    return "done" + (f" in {result['process_wall_s']} s" if "process_wall_s" in result else "")


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


def pin_threads(args: argparse.Namespace, framework: str) -> None:
    """A worker's TF (``"tf"``) or torch (``"torch"``) threads: every core intra-op,
    ``--inter_op_threads`` inter-op (the environment, `thread_env`, is the runner's)."""
    pin = {"tf": pin_tf_threads, "torch": pin_torch_threads}[framework]
    pin(os.cpu_count() or 1, args.inter_op_threads)


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


# --------------------------------------------------------------------------- report
def choices(text: str, allowed: Sequence[str], what: str) -> list[str]:
    """A comma-separated list of names, each one of ``allowed``."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in allowed:
            raise SystemExit(f"unknown {what} {name!r}; choose from {', '.join(allowed)}")
    return names


def output_path(args: argparse.Namespace, name: str, results_dir: str = RESULTS) -> str:
    """``--output``, else ``<results_dir>/<name>.json``; smoke runs go to the temp
    dir so they never replace real figures."""
    if args.output:
        return args.output
    if args.smoke:
        return os.path.join(tempfile.gettempdir(), f"{name}_smoke.json")
    return os.path.join(results_dir, f"{name}.json")


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
    """A worker's environment: threads pinned, and the repository importable
    (``python -m bench.<name>`` from any working directory)."""
    cores = os.cpu_count() or 1
    env = {**os.environ, **thread_env(cores, args.inter_op_threads, args.omp_wait_policy)}
    if args.omp_wait_policy == "default":
        env.pop("OMP_WAIT_POLICY", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    return env


def _spawn(module: str, job: Job, args: argparse.Namespace) -> dict[str, Any]:
    """Runs ``python -m <module> --worker <job>`` in fresh processes (one per
    ``job.envs``, started together); returns the JSON result line, never raises.

    A fresh process per measurement: no TF graph, allocator state or torch
    thread pool carries over from one variant to the next. The worker gets the
    runner's arguments with the job's ``params`` on them.
    """
    payload = json.dumps({"variant": job.variant, "params": job.params, "args": vars(args)})
    cmd = [sys.executable, "-m", module, "--worker", payload]
    load = [round(x, 2) for x in os.getloadavg()]
    start = time.perf_counter()
    # Own session, so a timeout kills the worker and anything it started.
    procs = [
        subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**worker_env(args), **env},
            cwd=REPO,
            start_new_session=True,
        )
        for env in job.envs
    ]
    results = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for p in procs:  # the others would wait for it forever
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
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
        results.append(result)
    return results[0] if len(results) == 1 else {"processes": results}


def _run_worker(benchmark: Benchmark, worker: str) -> None:
    """The worker side of `_spawn`: one job, its result line on stdout."""
    payload = json.loads(worker)
    args = argparse.Namespace(**payload["args"])
    job = Job(payload["variant"], payload["params"])
    worker_main(lambda: benchmark.measure(_with_params(args, job.params), job))


def worker_main(run: Callable[[], dict[str, Any]]) -> None:
    """Runs a worker body and prints its one result line (errors included)."""
    try:
        result = run()
        code = 0
    except Exception as e:  # reported to the runner, which carries on
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
