"""Activation memory of a pretraining step: bytes kept per example, before and after.

What a training step keeps for its backward pass grows with the batch; the rest does
not. The compiled step's own memory (`albert_tf.training.pretraining.memory.step_bytes`,
XLA's buffer assignment on this CPU) is measured for one and two examples per replica;
the difference is what one more example costs. ALBERT-base, length 512, bfloat16
compute, the ``xla`` implementation the accelerators run, in three forms:

* ``before``: the arithmetic as it was: the [B, heads, S, S] scores computed whole,
  float32 attention probabilities kept beside the bfloat16 ones, and the tanh
  GELU's backward keeping three FFN-sized tensors (rebuilt here by switching those
  back);
* ``lean``: today's default: attention by key blocks (`albert_tf.layers.blocked_attention`,
  nothing of [S, S] kept) and the GELU recomputed from its input;
* ``lean + recompute=layer``: only each transformer layer's input kept.

Writes ``bench/results/activation_memory.json`` and prints a table::

    python -m bench.activation_memory            # about 2 minutes on 2 cores
    python -m bench.activation_memory --smoke    # a tiny model, plumbing only
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os

from bench import common


@contextlib.contextmanager
def _before():
    """Swaps in the arithmetic of the code before the lean backward."""
    import tensorflow as tf

    from albert_tf.activations import gelu_new
    from albert_tf.layers import attention, implementations

    saved = attention.softmax_kept_as, implementations.XLA
    attention.softmax_kept_as = lambda s, dtype: tf.cast(tf.nn.softmax(s, axis=-1), dtype)
    implementations.XLA = dataclasses.replace(
        implementations.XLA, recompute_elementwise=False, blocked_attention=False
    )
    implementations.IMPLEMENTATIONS["xla"] = implementations.XLA
    assert gelu_new  # the kept-tensors GELU runs when recompute_elementwise is off
    try:
        yield
    finally:
        attention.softmax_kept_as, implementations.XLA = saved
        implementations.IMPLEMENTATIONS["xla"] = implementations.XLA


def measure(smoke: bool) -> dict:
    from albert_tf.presets import get_preset
    from albert_tf.training.pretraining.memory import step_bytes
    from albert_tf.training.pretraining.options import PretrainingOptions

    config = get_preset("albert_base_v2")
    seq = 512
    if smoke:
        config = config.replace(hidden_size=64, num_attention_heads=2, intermediate_size=128)
        seq = 64
    rows = []
    for name, recompute, patch in (
        ("before", "none", _before),
        ("lean", "none", contextlib.nullcontext),
        ("lean + recompute=layer", "layer", contextlib.nullcontext),
    ):
        options = PretrainingOptions(
            "unused", "unused", max_seq_length=seq, precision="bfloat16", recompute=recompute
        )
        with patch():
            one, two = (step_bytes(config, options, m) for m in (1, 2))
        rows.append({"variant": name, "one_example_bytes": one, "per_example_bytes": two - one})
        print(f"{name}: {(two - one) / 1e6:.1f} MB per example", flush=True)
    base = rows[0]["per_example_bytes"]
    for row in rows:
        row["fraction_of_before"] = row["per_example_bytes"] / base
    return {
        "machine": common.machine_info(),
        "model": "albert_base_v2" if not smoke else "smoke",
        "max_seq_length": seq,
        "precision": "bfloat16",
        "measured_on": "XLA:CPU buffer assignment",
        "rows": rows,
    }


def table(report: dict) -> str:
    lines = [
        "| variant | bytes kept per example | of before |",
        "| --- | ---: | ---: |",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['variant']} | {row['per_example_bytes'] / 1e6:.1f} MB | "
            f"{row['fraction_of_before']:.0%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    report = measure(args.smoke)
    path = args.output or (
        os.path.join(common.RESULTS, "activation_memory.json")
        if not args.smoke
        else os.path.join("/tmp", "activation_memory_smoke.json")
    )
    common.publish(report, path, table(report))


if __name__ == "__main__":
    main()
