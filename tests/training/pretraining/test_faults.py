"""Faults of real pretraining processes, injected deterministically.

``ALBERT_TF_FAULTS`` (albert_tf.training.pretraining.faults) kills a run at named points
or sends it SIGTERM; each restart must resume where the guarantees in
docs/pretraining.md ("When things go wrong") say, and finish with the weights
and learning curve of a run that was never interrupted.
"""

import contextlib
import http.server
import json
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from helpers.training_utils import free_ports, pretrain_command, pretrain_env

import albert_tf
from albert_tf.checkpoints.saved_format import named_weights

STEPS = 12
RECIPE = [
    f"--num_train_steps={STEPS}",
    "--save_checkpoints_steps=5",
    "--log_every_steps=1",
    "--progress_bar=false",
    # Two workers are compared with one process: float tolerance needs float32.
    "--precision=float32",
]
PREEMPTED, WORKER_LOST = 42, 3


def _run(prepared, model_dir, *extra, faults=None, timeout=600):
    env = pretrain_env(**({"ALBERT_TF_FAULTS": faults} if faults else {}))
    return subprocess.run(
        pretrain_command(prepared, model_dir, *RECIPE, *extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _saved_steps(model_dir):
    directory = model_dir / "checkpoints"
    return sorted(int(p.name[5:-6]) for p in directory.glob("ckpt-*.index"))


def _max_diff(model_dir, reference_dir):
    ours = named_weights(albert_tf.load(model_dir / "final"))
    theirs = named_weights(albert_tf.load(reference_dir / "final"))
    return max(float(np.abs(np.asarray(ours[k]) - np.asarray(theirs[k])).max()) for k in ours)


def _curve(model_dir):
    lines = (model_dir / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["mlm_loss"]) for r in map(json.loads, lines) if r["split"] == "train"]


@pytest.fixture(scope="module")
def reference(prepared, tmp_path_factory):
    """The same recipe, never interrupted."""
    model_dir = tmp_path_factory.mktemp("reference")
    result = _run(prepared, model_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return model_dir


def test_kills_at_each_named_point_resume_from_the_last_whole_checkpoint(
    prepared, reference, tmp_path
):
    model_dir = tmp_path / "run"
    # (fault, the step this run resumed from, checkpoints on disk after the kill)
    chain = [
        # After step 7's metrics line: ckpt-5 is the newest; 2 steps are redone.
        ("kill_after_metrics:7", None, [5]),
        # Halfway through saving ckpt-10: its data file without an index is
        # not a checkpoint; 5 steps are redone.
        ("kill_during_save:10", 5, [5]),
        # Just before saving ckpt-10: 5 steps are redone.
        ("kill_before_save:10", 5, [5]),
    ]
    for fault, resumed_from, on_disk in chain:
        killed = _run(prepared, model_dir, faults=fault)
        assert killed.returncode == -signal.SIGKILL, (fault, killed.stderr[-3000:])
        if resumed_from is not None:
            assert f"resumed from step {resumed_from} " in killed.stdout, fault
        assert _saved_steps(model_dir) == on_disk, fault
        if fault.startswith("kill_during_save"):
            assert (model_dir / "checkpoints" / "ckpt-10.data-00000-of-00001").exists()
            assert not (model_dir / "checkpoints" / "ckpt-10.index").exists()
        if fault.startswith("kill_after_metrics"):
            assert [s for s, _ in _curve(model_dir)][-1] == 7
    resumed = _run(prepared, model_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from step 5 " in resumed.stdout
    assert _saved_steps(model_dir) == [5, 10, 12]
    # Same data position, optimizer state and dropout state: the same model.
    assert _max_diff(model_dir, reference) < 1e-5
    # Every step once in the learning curve, with the uninterrupted run's losses.
    curve, expected = _curve(model_dir), _curve(reference)
    assert [s for s, _ in curve] == list(range(1, STEPS + 1))
    np.testing.assert_allclose([v for _, v in curve], [v for _, v in expected], atol=1e-5)


@contextlib.contextmanager
def _fake_gce_metadata():
    """A GCE metadata server on loopback, for the environment of a run: TensorFlow's
    preemption handler (failure_handling_util.detect_platform) then takes this CPU
    machine for a GCE CPU VM, where it handles no SIGTERM, as on a TPU VM."""

    class Metadata(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"NONE" if self.path.endswith("/maintenance-event") else b"vm.internal"
            self.send_response(200)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    no_proxy = "127.0.0.1,localhost"
    try:
        yield {
            "GCE_METADATA_IP": f"127.0.0.1:{server.server_port}",
            "NO_PROXY": no_proxy,
            "no_proxy": no_proxy,
        }
    finally:
        server.shutdown()
        server.server_close()


def test_our_sigterm_handler_stands_in_where_tensorflows_takes_none(tmp_path, monkeypatch):
    from albert_tf.training.pretraining.preemption import PreemptionSaver

    def saver():
        return PreemptionSaver(tf.distribute.get_strategy(), print, print, str(tmp_path))

    before = signal.getsignal(signal.SIGTERM)
    with saver() as off_gce:
        assert off_gce.sigterm == "tensorflow"
    with _fake_gce_metadata() as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with saver() as on_gce:
            assert on_gce.sigterm == "own"
            assert signal.getsignal(signal.SIGTERM) == on_gce._on_sigterm
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("handler", ["tensorflow", "own"])
def test_sigterm_saves_the_next_step_and_the_restart_loses_none(
    prepared, reference, tmp_path, handler
):
    # A real SIGTERM from outside, to the process a scheduler knows (the
    # command's launcher, which forwards it), once step 3 is logged. "own": the
    # run believes it is on a GCE VM, where TensorFlow's handler takes no SIGTERM
    # (without ours the signal would kill it: exit -15, nothing saved).
    model_dir = tmp_path / "run"
    with contextlib.ExitStack() as stack:
        extra = stack.enter_context(_fake_gce_metadata()) if handler == "own" else {}
        process = subprocess.Popen(
            pretrain_command(prepared, model_dir, *RECIPE),
            env=pretrain_env(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            if (model_dir / "metrics.jsonl").exists() and len(_curve(model_dir)) >= 3:
                process.send_signal(signal.SIGTERM)
                break
            time.sleep(0.02)
        out, err = process.communicate(timeout=300)
    assert process.returncode == PREEMPTED, err[-3000:]
    saved = int(out.split("checkpoint saved at step ")[1].split(";")[0])
    # TensorFlow's handler agrees on the step after the signal; ours saves at
    # the next step boundary, which may be step 3's own.
    assert (3 if handler == "own" else 4) <= saved < STEPS
    assert _saved_steps(model_dir)[-1] == saved
    # The checkpoint is the step the run stopped at: every step trained before
    # the exit is in it, none is lost.
    assert [s for s, _ in _curve(model_dir)][-1] == saved
    resumed = _run(prepared, model_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from step {saved} " in resumed.stdout
    assert _max_diff(model_dir, reference) < 1e-5


def _start_workers(prepared, model_dir, faults=None, extra=(), strategy="multi_worker_mirrored"):
    """Two real worker processes of one run over loopback; ``faults`` maps a
    worker index to its fault spec."""
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = pretrain_env(TF_CONFIG=json.dumps(tf_config))
        if faults and index in faults:
            env["ALBERT_TF_FAULTS"] = faults[index]
        processes.append(
            subprocess.Popen(
                pretrain_command(
                    prepared,
                    model_dir,
                    *RECIPE,
                    f"--strategy={strategy}",
                    *extra,
                ),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return processes


def _finish(processes, timeout=300):
    results = []
    for process in processes:
        out, err = process.communicate(timeout=timeout)
        results.append((process.returncode, out, err))
    return results


@pytest.fixture(scope="module")
def two_worker_reference(prepared, tmp_path_factory):
    """The recipe on two workers, never interrupted. (Two workers drift from one
    process over 12 steps of this tiny LAMB recipe, through float rounding of the
    split batch; a two-worker run is bit-identical from run to run.)"""
    model_dir = tmp_path_factory.mktemp("two_worker_reference")
    for code, _, err in _finish(_start_workers(prepared, model_dir)):
        assert code == 0, err[-3000:]
    return model_dir


def test_two_workers_preempted_on_one_save_together_and_resume(
    prepared, two_worker_reference, tmp_path
):
    model_dir = tmp_path / "run"
    # Only worker 1 gets the signal, after step 3; both save step 4 and exit.
    results = _finish(_start_workers(prepared, model_dir, faults={1: "sigterm_at_step:3"}))
    for code, out, err in results:
        assert code == PREEMPTED, err[-3000:]
        assert "checkpoint saved at step 4" in out
    assert _saved_steps(model_dir) == [4]
    assert not list(model_dir.glob("worker_*_scratch"))
    for code, out, err in _finish(_start_workers(prepared, model_dir)):
        assert code == 0, err[-3000:]
        assert "resumed from step 4 " in out
    assert _max_diff(model_dir, two_worker_reference) < 1e-5


def test_a_lost_worker_stops_the_survivor_and_both_resume(prepared, two_worker_reference, tmp_path):
    model_dir = tmp_path / "run"
    started = time.monotonic()
    # Worker 1 dies (SIGKILL) after step 7; ckpt-5 is the newest checkpoint.
    results = _finish(_start_workers(prepared, model_dir, faults={1: "kill_after_metrics:7"}))
    elapsed = time.monotonic() - started
    (survivor_code, _, survivor_err), (killed_code, _, _) = results
    assert killed_code == -signal.SIGKILL
    assert survivor_code == WORKER_LOST, survivor_err[-3000:]
    last = survivor_err.strip().splitlines()[-1]
    assert last.startswith("pretrain: error: lost a worker during step 8"), last
    assert "heartbeat timeout" in last or "connection closed" in last, last
    assert "resume together from the last checkpoint, step 5" in last
    # Bounded: start-up, 8 tiny steps and the ~10 s heartbeat timeout, not a hang.
    assert elapsed < 240, elapsed
    for code, out, err in _finish(_start_workers(prepared, model_dir)):
        assert code == 0, err[-3000:]
        assert "resumed from step 5 " in out
    assert _max_diff(model_dir, two_worker_reference) < 1e-5


def _copy_without_final(source, target):
    shutil.copytree(source, target)
    shutil.rmtree(target / "final")
    return target


def test_two_workers_skip_a_checkpoint_one_worker_saved_no_input_position_for(
    prepared, two_worker_reference, tmp_path
):
    # Each worker saves its own input position before the run's checkpoint; a
    # save cut short after worker 0's but before worker 1's leaves ckpt-12
    # without worker 1's position. Both workers must then resume from step 10,
    # where each has its own, and end where an uninterrupted run ends.
    model_dir = _copy_without_final(two_worker_reference, tmp_path / "run")
    positions = model_dir / "input_positions" / "2_workers"
    assert sorted(p.name for p in positions.iterdir()) == ["worker_0", "worker_1"]
    for path in (positions / "worker_1").glob("ckpt-12.*"):
        path.unlink()
    for code, out, err in _finish(_start_workers(prepared, model_dir)):
        assert code == 0, err[-3000:]
        assert "the input position of worker(s) 1 at step 12 is missing" in out
        assert "resumed from step 10 " in out
    assert _max_diff(model_dir, two_worker_reference) < 1e-5


def test_one_process_resumes_two_workers_checkpoint_with_the_input_from_the_start(
    prepared, two_worker_reference, tmp_path
):
    # The workers' input positions hold rows cut for two workers: one process
    # cannot continue them, so it says so and reads the data from the start.
    model_dir = _copy_without_final(two_worker_reference, tmp_path / "run")
    result = _run(prepared, model_dir, f"--num_train_steps={STEPS + 1}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ckpt-12 holds no input position (a multi-worker" in result.stdout
    assert "starts again from the beginning of the data" in result.stdout
    assert "resumed from step 12 " in result.stdout
    assert _saved_steps(model_dir)[-1] == STEPS + 1


def test_auto_strategy_under_a_multi_task_tf_config_trains_one_job(prepared, tmp_path):
    # What a scheduler that sets TF_CONFIG launches: every process with the same
    # command and --strategy=auto. They must train as one job, not each alone as
    # chief. A short --save_checkpoints_seconds makes the time bound save (at
    # an interval each worker measures on its own clock): they must agree on it.
    model_dir = tmp_path / "run"
    steps = 40
    extra = (
        f"--num_train_steps={steps}",
        "--save_checkpoints_steps=1000",
        "--save_checkpoints_seconds=0.1",
        "--keep_checkpoint_max=100",
    )
    results = _finish(_start_workers(prepared, model_dir, extra=extra, strategy="auto"))
    for code, out, err in results:
        assert code == 0, err[-3000:]
        # MultiWorkerMirroredStrategy's class is named CollectiveAllReduceStrategy.
        assert "strategy CollectiveAllReduceStrategy with 2 replica(s)" in out, out
    # One chief wrote the run's checkpoints; the other worker's scratch is gone.
    saved = _saved_steps(model_dir)
    assert saved[-1] == steps
    assert not list(model_dir.glob("worker_*_scratch"))
    # Saved by the time bound, at one interval for both workers: each worker's
    # input position exists at every saved step.
    timed = saved[:-1]
    assert len(timed) >= 2, saved
    interval = timed[1] - timed[0]
    # Timing ends at step 11; from there on, every multiple of the interval.
    assert timed[0] % interval == 0 and timed[0] - interval < 11, saved
    assert timed == list(range(timed[0], steps, interval)), saved
    positions = model_dir / "input_positions" / "2_workers"
    for worker in ("worker_0", "worker_1"):
        assert _saved_steps_in(positions / worker) == saved, worker


def _saved_steps_in(directory):
    return sorted(int(p.name[5:-6]) for p in directory.glob("ckpt-*.index"))
