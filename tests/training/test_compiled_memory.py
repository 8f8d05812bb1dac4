"""`compiled_memory` against programs whose buffers are known in advance, and against
the buffer assignment XLA itself writes with ``--xla_dump_to``."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from helpers.paths import REPO

from albert_tf.training.compiled_memory import CompiledMemory, compiled_memory


def _exp_scores(q, k):
    # The one intermediate is exp(q kᵀ) [n, n] (the matmul's result is
    # overwritten in place by the exponential): n² float32 bytes of temporaries.
    return tf.reduce_sum(tf.exp(tf.matmul(q, k, transpose_b=True)), axis=1)


@pytest.mark.parametrize("n", [256, 512])
def test_one_known_temporary(n):
    spec = tf.TensorSpec([n, 64], tf.float32)
    memory = compiled_memory(_exp_scores, spec, spec)
    assert isinstance(memory, CompiledMemory)
    assert memory.platform == "CPU"
    assert memory.temp_bytes == n * n * 4
    assert memory.argument_bytes == 2 * n * 64 * 4
    assert memory.output_bytes == n * 4
    assert memory.alias_bytes == 0
    assert memory.largest_temporary_bytes == n * n * 4
    assert memory.total_bytes == memory.argument_bytes + memory.output_bytes + n * n * 4


def test_tensors_arrays_and_specs_give_the_same_plan_and_nothing_runs():
    rng = np.random.RandomState(0)
    q = rng.randn(128, 64).astype("float32")
    calls = []

    def fn(a, b):
        calls.append(1)  # traced once; a Python side effect, never a run
        return _exp_scores(a, b)

    from_specs = compiled_memory(fn, tf.TensorSpec([128, 64]), tf.TensorSpec([128, 64]))
    from_values = compiled_memory(fn, q, tf.constant(q))
    assert from_specs == from_values


def test_variables_are_arguments_and_python_leaves_are_fixed():
    weight = tf.Variable(tf.zeros([256, 128]))  # 128 KiB

    def step(inputs, scale, *, square):
        x = inputs["x"] * scale
        y = tf.matmul(x, weight)
        return tf.reduce_sum(y * y if square else y)

    memory = compiled_memory(step, {"x": tf.TensorSpec([32, 256])}, 2.0, square=True)
    assert memory.argument_bytes == 256 * 128 * 4 + 32 * 256 * 4
    assert memory.output_bytes == 4


def test_an_update_in_place_is_an_alias():
    weight = tf.Variable(tf.zeros([256, 256]))

    def step(x):
        weight.assign_add(tf.matmul(x, x, transpose_a=True))
        return tf.constant(0.0)

    memory = compiled_memory(step, tf.TensorSpec([8, 256]))
    # The variable is read and written: TensorFlow's XLA bridge returns the new
    # value in the parameter's buffer, so it is counted once in the total.
    assert memory.argument_bytes == 256 * 256 * 4 + 8 * 256 * 4
    assert memory.alias_bytes == 256 * 256 * 4
    assert memory.total_bytes < 2 * 256 * 256 * 4 + memory.temp_bytes


def test_an_unknown_dimension_is_refused():
    with pytest.raises(ValueError, match="static shapes"):
        compiled_memory(_exp_scores, tf.TensorSpec([None, 64]), tf.TensorSpec([8, 64]))


_DUMP_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    from albert_tf.training.compiled_memory import compiled_memory

    def fn(q, k):
        s = tf.nn.softmax(tf.matmul(q, k, transpose_b=True))
        return tf.matmul(s, k), tf.reduce_max(s, axis=0)

    q = tf.random.normal([384, 64])
    run = tf.function(fn, jit_compile=True)
    run(q, q)  # the executable XLA dumps
    m = compiled_memory(fn, q, q)
    print(json.dumps({"temp": m.temp_bytes, "arguments": m.argument_bytes}))
    """
)


def test_agrees_with_the_buffer_assignment_xla_dumps(tmp_path):
    # The other route to the same numbers: XLA_FLAGS=--xla_dump_to writes each
    # module's buffer assignment as text (allocations with their kinds).
    env = {
        **os.environ,
        "XLA_FLAGS": f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": str(REPO),
    }
    out = subprocess.run(
        [sys.executable, "-c", _DUMP_SCRIPT], env=env, capture_output=True, text=True, check=True
    ).stdout
    ours = __import__("json").loads(out.strip().splitlines()[-1])
    dumps = sorted(tmp_path.glob("*cpu_after_optimizations-buffer-assignment.txt"))
    assert dumps, os.listdir(tmp_path)
    for dump in dumps:  # the run's and ours: the same program
        text = dump.read_text()
        temp = sum(
            int(size)
            for size in re.findall(r"^allocation \d+: size (\d+), preallocated-temp", text, re.M)
        )
        arguments = sum(
            int(size) for size in re.findall(r"^allocation \d+: size (\d+), parameter", text, re.M)
        )
        assert (temp, arguments) == (ours["temp"], ours["arguments"]), dump.name
