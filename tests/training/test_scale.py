"""Runs that look like the real ones: two mirrored replicas, dropout 0.1, every
precision, XLA, accumulation, compiled loops, a token budget and a URL model_dir.

One subprocess (`scale_worker.py`) runs them all: logical devices must be set
before TensorFlow starts. Where the maths says two runs are the same
computation, they must agree within float32's budget for the model's depth;
elsewhere a run must train (finite, moving weights) and report what it chose.
"""

import json
import os
import subprocess
import sys

import pytest
from helpers.numerics import albert_depth_and_width, float32_budget
from helpers.training_utils import tiny_albert

WORKER = os.path.join(os.path.dirname(__file__), "scale_worker.py")
# The worker runs 3 to 4 minutes here; the subprocess bound is the test's.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def results(prepared, tmp_path_factory):
    work = tmp_path_factory.mktemp("scale")
    out = work / "results.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, WORKER, str(out), prepared.train_files, prepared.tokenizer_dir, str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def budget(prepared):
    """Relative float32 difference allowed between two orders of one step: the forward
    pass's reductions, and as many again for the backward pass."""
    from albert_tf.tokenizers import load_tokenizer

    config = tiny_albert(load_tokenizer(prepared.tokenizer_dir).vocabulary_size)
    depth, width = albert_depth_and_width(config, seq_length=32)
    return float32_budget(depth=2 * depth, width=width)


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def test_one_step_is_the_same_on_one_replica_two_and_two_accumulated(results, budget):
    one, two, acc = (results["equal"][k] for k in ("one", "two", "two_acc"))
    assert one["examples"] == two["examples"] == acc["examples"] == 8
    assert one["correct"] == two["correct"] == acc["correct"]
    for key in ("loss_sum", "grad_norm"):
        assert _close(two[key], one[key], budget), (key, one[key], two[key], budget)
        assert _close(acc[key], one[key], budget), (key, one[key], acc[key], budget)
    assert one["grad_norm"] > 0


def test_a_replica_with_an_empty_slice_adds_nothing(results, budget):
    # One example on two replicas: one replica gets no rows, and the step is still
    # the one-device step on that example.
    one, two = results["equal"]["one_item"], results["equal"]["two_item"]
    assert one["examples"] == two["examples"] == 1
    for key in ("loss_sum", "grad_norm"):
        assert _close(two[key], one[key], budget), (key, one[key], two[key], budget)
    assert two["applied"] == 1.0


@pytest.mark.parametrize("head", ["", "_crf"], ids=["softmax", "crf"])
def test_a_tagging_step_is_the_same_on_one_replica_and_two(results, budget, head):
    # The loss is a mean over the global batch's scored pieces, and the two replicas
    # hold unequal numbers of them: a mean of per-replica means would weight them
    # otherwise, which the gradient norm shows (the loss sums would still agree).
    # A CRF's loss is one chain per window, summed, then divided the same way.
    tagging = results["equal_tagging"]
    one, two = tagging[f"one{head}"], tagging[f"two{head}"]
    first, second = one["scored_per_half"]
    assert first != second and first > 0 and second > 0
    assert one["examples"] == two["examples"] == 4  # texts, each one window
    assert one["scored"] == two["scored"] == first + second
    assert one["correct"] == two["correct"]
    for key in ("loss_sum", "grad_norm"):
        assert _close(two[key], one[key], budget), (key, one[key], two[key], budget)
    assert one["grad_norm"] > 0


@pytest.mark.parametrize("variant", ["float16_accumulation", "bfloat16", "xla_loops"])
def test_finetuning_trains_on_two_replicas_with_dropout(results, variant):
    run = results["finetune"][variant]
    assert run["steps"] == 4
    assert run["weights_finite"]
    assert run["weights_moved"] > 0
    assert 0 < run["train_loss"] < 5 and 0 < run["dev_loss"] < 5
    expected = "LossScaleOptimizer" if variant.startswith("float16") else "AlbertOptimizer"
    assert run["loss_scaling"] == expected


def test_finetuning_in_compiled_loops_equals_a_step_a_call(results, budget):
    step, loops = results["finetune"]["f32_step"], results["finetune"]["f32_loops"]
    assert step["steps"] == loops["steps"] == 5
    # Five Adam steps on the same batches: a step's rounding moves later steps'
    # inputs, so allow the budget once per step.
    for key in ("train_loss", "dev_loss"):
        assert _close(loops[key], step[key], 5 * budget), (key, step[key], loops[key])


@pytest.mark.parametrize("variant", ["float16_accumulation", "bfloat16_token_budget", "xla_loops"])
def test_pretraining_trains_on_two_replicas_with_dropout(results, variant):
    run = results["pretrain"][variant]
    assert run["step"] == 3
    assert run["weights_finite"]
    assert 0 < run["loss"] < 20
    assert "MirroredStrategy with 2 replica(s)" in run["describe"]
    precision = variant.split("_")[0] if "float16" in variant else "float32"
    assert f"precision {precision}" in run["describe"]
    assert ("XLA on" in run["describe"]) == variant.startswith("xla")


def test_pretraining_resumes_from_a_url_model_dir_on_two_replicas(results):
    pretrain = results["pretrain"]
    assert pretrain["url_2"]["step"] == 2 and pretrain["url_4"]["step"] == 4
    assert any("resumed from step 2 (file://" in line for line in pretrain["url_log"])
