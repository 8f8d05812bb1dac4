"""The memory plan: its arithmetic on faked device memory, checked against the compiled
step's own measure, and what the activation-memory options save on that measure."""

import re

import pytest
from helpers.commands import run_command
from helpers.testing_utils import tiny_config

from albert_tf.training.memory_plan import DeviceBudget, parse_devices, plan_batches
from albert_tf.training.pretraining.memory import step_bytes
from albert_tf.training.pretraining.options import PretrainingOptions

CONFIG = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ = 64


def _options(**kw):
    return PretrainingOptions("unused", "unused", max_seq_length=SEQ, precision="float32", **kw)


def test_plan_fits_by_the_compiled_step_and_one_step_larger_would_not():
    options = _options(train_batch_size=64)
    one, two = step_bytes(CONFIG, options, 1), step_bytes(CONFIG, options, 2)
    per_example = two - one
    assert per_example > 0
    # A faked device that holds about 5 examples' activations: micro-batch 4 of 8
    # per device (64 over 8 devices) must be chosen, with 2 accumulation steps.
    memory = int((one + 4.5 * per_example) / 0.9)
    budget = DeviceBudget(8, memory, "8 faked")
    plan = plan_batches(
        global_batch=64, budget=budget, measure=lambda m: step_bytes(CONFIG, options, m)
    )
    assert (plan.micro_batch, plan.accumulation_steps) == (4, 2)
    assert plan.micro_batch * plan.accumulation_steps * budget.count == 64
    # Fits by the step compiled at that size, and the next size (8) does not.
    assert step_bytes(CONFIG, options, 4) <= budget.usable_bytes
    assert step_bytes(CONFIG, options, 8) > budget.usable_bytes
    assert plan.next_larger[0] == 8


def test_nothing_fits_is_refused_with_the_numbers():
    with pytest.raises(ValueError, match=r"nothing fits: one example per device needs 5,000 bytes"):
        plan_batches(
            global_batch=8, budget=DeviceBudget(1, 1000, "1x1kB"), measure=lambda m: 5000 * m
        )
    with pytest.raises(ValueError, match="does not divide over 3 devices"):
        plan_batches(global_batch=8, budget=DeviceBudget(3, 10**9, "3"), measure=len)


@pytest.mark.parametrize(
    "text, count, per_device",
    [
        ("8x80GB", 8, 80 * 10**9),
        ("2x40GiB", 2, 40 * 2**30),
        ("v3-8", 8, 16 * 2**30),
        ("v4-32", 16, 32 * 2**30),
    ],
)
def test_assumed_devices(text, count, per_device):
    budget = parse_devices(text)
    assert (budget.count, budget.bytes_per_device) == (count, per_device)


def test_assumed_devices_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="COUNTxMEMORY"):
        parse_devices("eight GPUs")


def test_layer_recompute_cuts_the_activations_per_example():
    kept = _options()
    per_example = step_bytes(CONFIG, kept, 2) - step_bytes(CONFIG, kept, 1)
    recomputed = _options(recompute="layer")
    fewer = step_bytes(CONFIG, recomputed, 2) - step_bytes(CONFIG, recomputed, 1)
    # Four applied layers: keeping one layer's inputs instead of every layer's
    # intermediates must at least halve what an example costs.
    assert fewer < 0.5 * per_example, (fewer, per_example)


def test_plan_only_prints_a_plan_that_multiplies_to_the_batch(tmp_path):
    flagfile = tmp_path / "tiny.flags"
    flagfile.write_text(
        "--preset=albert_base_v2\n--embedding_size=16\n--hidden_size=32\n"
        "--num_hidden_layers=2\n--num_attention_heads=2\n--intermediate_size=64\n"
        "--max_seq_length=64\n--train_batch_size=256\n--precision=auto\n"
    )
    result = run_command(
        "pretrain", f"--flagfile={flagfile}", "--plan_only", "--assume_devices=4x1GB", timeout=300
    )
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("memory plan:"))
    assert "4 device(s)" in line and "precision bfloat16" in result.stdout
    micro, steps = map(int, re.search(r"micro-batch (\d+) × (\d+) accumulation", line).groups())
    assert micro * steps * 4 == 256
    bad = run_command("pretrain", f"--flagfile={flagfile}", "--plan_only", timeout=300)
    assert bad.returncode == 2 and "--assume_devices" in bad.stderr
