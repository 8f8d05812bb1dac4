"""Real multi-replica and multi-worker runs equal a single-process run."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers.training_utils import free_ports

WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")


def _env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.update(extra)
    return env


def _weights(path):
    with np.load(path) as f:
        return [
            f[k]
            for k in sorted((k for k in f.files if k.startswith("arr_")), key=lambda k: int(k[4:]))
        ], int(f["replicas"])


def _run(strategy, out, prepared, model_dir, env=None, steps_per_loop=1):
    return subprocess.Popen(
        [
            sys.executable,
            WORKER,
            strategy,
            str(out),
            prepared.train_files,
            prepared.tokenizer_dir,
            str(model_dir),
            str(steps_per_loop),
        ],
        env=env or _env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(process, timeout=600):
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-4000:]


@pytest.fixture(scope="module")
def single(prepared, tmp_path_factory):
    d = tmp_path_factory.mktemp("single")
    _wait(_run("default", d / "w.npz", prepared, d / "model"))
    return _weights(d / "w.npz")[0]


def _max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True))


def test_two_mirrored_replicas_equal_one(prepared, single, tmp_path):
    _wait(_run("mirrored2", tmp_path / "w.npz", prepared, tmp_path / "model"))
    weights, replicas = _weights(tmp_path / "w.npz")
    assert replicas == 2
    assert _max_diff(weights, single) < 1e-5


def test_two_replicas_in_compiled_loops_equal_one_replica_a_step_a_call(prepared, single, tmp_path):
    # Five steps as loops of 2, 2 and 1 (the run's end stops a loop), each one
    # compiled call on two mirrored replicas: the same steps on the same batches.
    _wait(_run("mirrored2", tmp_path / "w.npz", prepared, tmp_path / "model", steps_per_loop=2))
    weights, replicas = _weights(tmp_path / "w.npz")
    assert replicas == 2
    assert _max_diff(weights, single) < 1e-5


def test_two_workers_agree_and_equal_one_worker(prepared, single, tmp_path):
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(
            _run(
                "multi_worker",
                tmp_path / f"w{index}.npz",
                prepared,
                tmp_path / "model",
                env=_env(TF_CONFIG=json.dumps(tf_config)),
            )
        )
    for process in processes:
        _wait(process)
    (w0, r0), (w1, r1) = _weights(tmp_path / "w0.npz"), _weights(tmp_path / "w1.npz")
    assert r0 == r1 == 2
    assert _max_diff(w0, w1) == 0.0  # synchronous training: bit-identical
    assert _max_diff(w0, single) < 1e-5
    # Each worker parsed and masked only its half of every global batch of 8.
    assert [int(np.load(tmp_path / f"w{i}.npz")["rows"]) for i in (0, 1)] == [4, 4]
    # So each saved its own input position, beside the chief's checkpoints.
    positions = tmp_path / "model" / "input_positions" / "2_workers"
    for worker in (0, 1):
        assert (positions / f"worker_{worker}" / "ckpt-5.index").exists()
    # Only the chief wrote checkpoints; the other worker cleaned its scratch.
    assert os.path.isdir(tmp_path / "model" / "checkpoints")
    assert not os.path.exists(tmp_path / "model" / "worker_1_scratch")
