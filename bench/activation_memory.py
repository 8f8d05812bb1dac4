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
* ``recompute_layer``: ``lean`` with ``--recompute=layer``, only each transformer
  layer's input kept.

Writes ``bench/results/activation_memory.json``::

    python -m bench.activation_memory            # about 2 minutes on 2 cores
    python -m bench.activation_memory --smoke    # a tiny model, plumbing only
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from typing import Any

from bench import common
from bench.common import Job, Steps

#: variant → (``recompute``, whether the arithmetic before the lean backward is rebuilt)
VARIANTS = {"before": ("none", True), "lean": ("none", False), "recompute_layer": ("layer", False)}


@contextlib.contextmanager
def _before():
    """Switches the xla implementation back to the arithmetic before the lean backward."""
    import tensorflow as tf

    from albert_tf.layers import attention, implementations

    saved = attention.softmax_kept_as, implementations.XLA
    attention.softmax_kept_as = lambda s, dtype: tf.cast(tf.nn.softmax(s, axis=-1), dtype)
    implementations.XLA = dataclasses.replace(
        implementations.XLA, recompute_elementwise=False, blocked_attention=False
    )
    implementations.IMPLEMENTATIONS["xla"] = implementations.XLA
    try:
        yield
    finally:
        attention.softmax_kept_as, implementations.XLA = saved
        implementations.IMPLEMENTATIONS["xla"] = implementations.XLA


class ActivationMemory(common.Benchmark):
    name = "activation_memory"
    what = (
        "bytes a pretraining step keeps per example (ALBERT-base, length 512, bfloat16, "
        "XLA:CPU buffer assignment of one replica's forward and backward pass)"
    )
    variants = tuple(VARIANTS)
    isolated = False  # memory is read from the compiled plan, not timed

    def configure(self, args: argparse.Namespace) -> None:
        args.seq = 64 if args.smoke else 512

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "model": "smoke" if args.smoke else "albert_base_v2",
            "max_seq_length": args.seq,
            "precision": "bfloat16",
            "memory": "XLA:CPU buffer assignment, albert_tf.training.pretraining.memory",
        }

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        report["results"] = {}
        for variant in args.variants:
            report["results"][variant] = yield Job(variant, {"variant": variant})

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        from albert_tf.presets import get_preset
        from albert_tf.training.pretraining.memory import step_bytes
        from albert_tf.training.pretraining.options import PretrainingOptions

        config = get_preset("albert_base_v2")
        if args.smoke:
            config = config.replace(hidden_size=64, num_attention_heads=2, intermediate_size=128)
        recompute, before = VARIANTS[args.variant]
        options = PretrainingOptions(
            "unused", "unused", max_seq_length=args.seq, precision="bfloat16", recompute=recompute
        )
        with _before() if before else contextlib.nullcontext():
            one, two = (step_bytes(config, options, m) for m in (1, 2))
        return {"one_example_bytes": one, "per_example_bytes": two - one}

    def summarize(self, report: dict[str, Any]) -> None:
        results = report.get("results", {})
        base = results.get("before", {}).get("per_example_bytes")
        for row in results.values():
            if base and "per_example_bytes" in row:
                row["fraction_of_before"] = round(row["per_example_bytes"] / base, 3)

    def table(self, report: dict[str, Any]) -> str:
        lines = ["| variant | bytes kept per example | of before |", "| --- | ---: | ---: |"]
        for variant, row in report["results"].items():
            fraction = row.get("fraction_of_before")
            lines.append(
                f"| {variant} | {row['per_example_bytes'] / 1e6:.1f} MB | "
                f"{'' if fraction is None else f'{fraction:.0%}'} |"
            )
        return "\n".join(lines)


if __name__ == "__main__":
    common.main(ActivationMemory())
