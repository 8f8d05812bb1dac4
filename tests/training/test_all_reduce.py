"""A training step all-reduces each gradient once, not once per layer of code."""

import json
import os
import subprocess
import sys

import pytest

WORKER = os.path.join(os.path.dirname(__file__), "all_reduce_worker.py")


def _count(prepared, model_dir, accumulation):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(
        [
            sys.executable,
            WORKER,
            prepared.train_files,
            prepared.tokenizer_dir,
            str(model_dir),
            str(accumulation),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("accumulation", [1, 2])
def test_step_all_reduces_one_gradients_worth(prepared, tmp_path, accumulation):
    counts = _count(prepared, tmp_path / "model", accumulation)
    # Each replica's CollectiveReduce op carries its own copy of the inputs.
    one_gradient = counts["gradient_bytes"] * counts["replicas"]
    # Besides the gradient: the example counts and the loss sums, a few
    # scalars per replica, far less than a second gradient.
    assert one_gradient <= counts["bytes"] < one_gradient + 1024, counts
