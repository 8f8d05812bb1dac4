"""Steps lost and recovery time for each fault of a pretraining run.

Runs ``python -m albert_tf.pretrain`` as a user does (a small model on the
embedded English sample, 12 steps, a checkpoint every 5) and injects each fault
of docs/pretraining.md ("When things go wrong") through ``ALBERT_TF_FAULTS``:
SIGKILL after a metrics line, just before a save and halfway through one; a
SIGTERM (preemption) on one process and on one of two workers; a worker lost
with SIGKILL from a two-worker run. Then it restarts the same command and
measures:

* **steps lost**: steps trained before the fault that the restart trains again;
* **detection** (lost worker): seconds from the kill to the survivor's exit;
* **recovery**: seconds from the restart's launch to its first new step
  (start-up, restore, the first step), beside a fresh start's time to step 1.

    python -m experiments.faults             # experiments/results/faults.json (~10 min)
    python -m experiments.faults --smoke     # the same run, report in /tmp
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import experiments
from bench import common
from bench.common import Job, Steps

RECIPE = [
    "--preset=albert_base_v2",
    "--embedding_size=64",
    "--hidden_size=128",
    "--num_hidden_layers=4",
    "--num_attention_heads=2",
    "--intermediate_size=512",
    "--max_seq_length=64",
    "--train_batch_size=16",
    "--num_train_steps=12",
    "--num_warmup_steps=2",
    "--save_checkpoints_steps=5",
    "--log_every_steps=1",
    "--num_eval_steps=1",
    "--progress_bar=false",
    "--precision=float32",
]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    env.pop("ALBERT_TF_FAULTS", None)
    env.update(extra)
    return env


def _command(data: dict, model_dir: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "albert_tf.pretrain",
        f"--model_dir={model_dir}",
        f"--train_files={data['train_files']}",
        f"--eval_files={data['eval_files']}",
        f"--tokenizer_dir={data['tokenizer_dir']}",
        *RECIPE,
        *extra,
    ]


def _start(commands: list[tuple[list[str], dict]]) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c, e in commands
    ]


def _workers(data: dict, model_dir: str, faults: dict[int, str] | None = None):
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    commands = []
    for index in range(2):
        env = _env(
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        )
        if faults and index in faults:
            env["ALBERT_TF_FAULTS"] = faults[index]
        commands.append((_command(data, model_dir, "--strategy=multi_worker_mirrored"), env))
    return commands


def _watch(processes: list[subprocess.Popen]) -> tuple[list[tuple[int, str, str]], list[float]]:
    """Waits for every process; returns their results and exit times (monotonic)."""
    ended = [0.0] * len(processes)
    while not all(ended):
        for i, p in enumerate(processes):
            if not ended[i] and p.poll() is not None:
                ended[i] = time.monotonic()
        time.sleep(0.01)
    return [(p.returncode, *p.communicate()) for p in processes], ended


def _resume(commands) -> tuple[int, float, float]:
    """Restarts a run; returns (step resumed from, seconds from launch to the
    "resumed" line, seconds of the whole restart)."""
    started = time.monotonic()
    processes = _start(commands)
    first = processes[0]
    resumed_at, step = None, None
    for line in first.stdout:
        if line.startswith("resumed from step "):
            resumed_at, step = time.monotonic() - started, int(line.split()[3])
            break
    results, ended = _watch(processes)
    for code, _, err in results:
        if code != 0:
            raise RuntimeError(f"restart failed ({code}): {err[-2000:]}")
    if step is None:
        raise RuntimeError("the restart did not resume")
    return step, resumed_at, max(ended) - started


def _saved_step(stdout: str) -> int:
    """The step a preempted run says it saved ("checkpoint saved at step N; ...")."""
    return int(stdout.split("checkpoint saved at step ")[1].split(";")[0])


def _row(
    fault: str,
    workers: int,
    trained: int,
    detection: float | None,
    restart: tuple[int, float, float],
) -> dict:
    """One fault's line of the report, from the restart `_resume` timed."""
    step, resumed_seconds, total_seconds = restart
    return dict(
        fault=fault,
        workers=workers,
        trained_before_fault=trained,
        resumed_from=step,
        steps_lost=trained - step,
        detection_seconds=detection,
        restart_to_resumed_seconds=resumed_seconds,
        restart_total_seconds=total_seconds,
    )


#: One process: name, ALBERT_TF_FAULTS, steps trained before the fault (None: the
#: step the run says it saved) and the exit code the fault must end the run with.
SINGLE = (
    ("kill after metrics line (step 7)", "kill_after_metrics:7", 7, -9),
    ("kill before save (step 10)", "kill_before_save:10", 10, -9),
    ("kill halfway through save (step 10)", "kill_during_save:10", 10, -9),
    ("SIGTERM preemption (after step 7)", "sigterm_at_step:7", None, 42),
)
#: Two workers: name, ALBERT_TF_FAULTS by worker index, steps trained before the fault.
TWO = (
    ("SIGTERM to one of two workers (after step 3)", {1: "sigterm_at_step:3"}, None),
    ("one of two workers killed (after step 7)", {1: "kill_after_metrics:7"}, 7),
)


def single(work: str, data: dict, name: str, fault: str, trained_before: int | None, code: int):
    """One process killed or preempted, then restarted: its report row."""
    model_dir = os.path.join(work, name)
    shutil.rmtree(model_dir, ignore_errors=True)
    ((exit_code, out, _),) = _watch(
        _start([(_command(data, model_dir), _env(ALBERT_TF_FAULTS=fault))])
    )[0]
    assert exit_code == code, (name, exit_code)
    trained = _saved_step(out) if trained_before is None else trained_before
    return _row(name, 1, trained, None, _resume([(_command(data, model_dir), _env())]))


def two(work: str, data: dict, name: str, faults: dict[int, str], trained_before: int | None):
    """One of two workers killed or preempted, then both restarted: its report row."""
    model_dir = os.path.join(work, name)
    results, ended = _watch(_start(_workers(data, model_dir, faults)))
    detection = None
    codes = [c for c, _, _ in results]
    if -9 in codes:  # a worker was lost: how long the survivor took to stop
        dead, alive = codes.index(-9), 1 - codes.index(-9)
        detection = ended[alive] - ended[dead]
        assert codes[alive] == 3, results[alive][2][-2000:]
    trained = _saved_step(results[0][1]) if trained_before is None else trained_before
    return _row(name, 2, trained, detection, _resume(_workers(data, model_dir)))


class Faults(common.Benchmark):
    name = "faults"
    what = "steps lost and recovery time for each fault of a pretraining run"
    isolated = False  # every run is a `python -m albert_tf.pretrain` process of its own
    results_dir = experiments.RESULTS

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"recipe": RECIPE}

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        args.work = tempfile.mkdtemp(prefix="bench_faults_")
        args.data = yield Job("data", label="pretraining data")

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        # A fresh start: start-up time and the time of one step, for scale.
        report["fresh_start_seconds"] = (yield Job("fresh", label="fresh 12-step run"))["seconds"]
        report["faults"] = []
        for name, fault, trained, code in SINGLE:
            params = {"name": name, "fault": fault, "trained_before": trained, "exit_code": code}
            report["faults"].append((yield Job("single", params, name)))
        for name, faults, trained in TWO:
            params = {"name": name, "faults": faults, "trained_before": trained}
            report["faults"].append((yield Job("two", params, name)))

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        if job.variant == "data":
            from albert_tf.data.preparation import prepare_pretraining_data

            prepared = prepare_pretraining_data(
                "sample:en",
                os.path.join(args.work, "data"),
                vocab_size=2000,
                max_seq_length=64,
                dupe_factor=2,
                eval_every=8,
                log=lambda *_: None,
            )
            return {k: getattr(prepared, k) for k in ("train_files", "eval_files", "tokenizer_dir")}
        if job.variant == "fresh":
            started = time.monotonic()
            fresh = os.path.join(args.work, "fresh")
            ((code, _, err),) = _watch(_start([(_command(args.data, fresh), _env())]))[0]
            if code != 0:
                raise RuntimeError(err[-2000:])
            return {"seconds": time.monotonic() - started}
        if job.variant == "single":
            return single(
                args.work, args.data, args.name, args.fault, args.trained_before, args.exit_code
            )
        return two(args.work, args.data, args.name, args.faults, args.trained_before)

    def table(self, report: dict[str, Any]) -> str:
        lines = [
            f"fresh 12-step run: {report['fresh_start_seconds']:.1f} s",
            "| fault | workers | trained | resumed from | steps lost | detection s | restart s |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in report["faults"]:
            det = "" if r["detection_seconds"] is None else f"{r['detection_seconds']:.1f}"
            lines.append(
                f"| {r['fault']} | {r['workers']} | {r['trained_before_fault']} "
                f"| {r['resumed_from']} | {r['steps_lost']} | {det} "
                f"| {r['restart_to_resumed_seconds']:.1f} |"
            )
        return "\n".join(lines)

    def cleanup(self, args: argparse.Namespace) -> None:
        if getattr(args, "work", None):
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    common.main(Faults())
