"""Stock against blocked self-attention: XLA's temporaries and the time of forward + backward.

One attention application of ALBERT-base's shape (12 heads of 64, batch 1, float32)
at S = 512, 1024 and 2048, its gradient with respect to q, k and v through a random
upstream gradient, compiled with ``jit_compile=True`` on this CPU:

* stock: ``softmax(where(allowed, q kᵀ, -1e9)) v`` as `AlbertAttention` computes it
  (scores cast to float32, softmax, probabilities back to the compute dtype);
* blocked: `albert_tf.layers.blocked_attention.blocked_attention`, 128 keys a block.

For each: XLA's preallocated temporaries for the step
(`albert_tf.training.compiled_memory`, read from the compiled program's buffer
assignment) beside B·N·S² float32 bytes (one [B, N, S, S] tensor), and the median
time of the compiled step (both in this one process, one after the other, threads
pinned). Writes ``bench/results/attention_memory.json``::

    python -m bench.attention_memory
    python -m bench.attention_memory --smoke   # S = 128, 256, 2 heads; output in /tmp
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from bench import common
from bench.common import Job, Steps

HEADS, HEAD_DIM, BATCH, BLOCK = 12, 64, 1, 128
MIB = 2**20


def _step_functions():
    import tensorflow as tf

    from albert_tf.layers.blocked_attention import blocked_attention

    def stock(q, k, v, allowed):
        scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)
        scores = tf.where(allowed, scores, -1e9)
        return tf.matmul(tf.cast(tf.nn.softmax(scores, axis=-1), q.dtype), v)

    def blocked(q, k, v, allowed):
        return blocked_attention(q, k, v, allowed, block_size=BLOCK)

    def gradients_of(attend):
        def step(q, k, v, upstream, allowed):
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                out = attend(q, k, v, allowed)
            return tape.gradient(out, [q, k, v], output_gradients=upstream)

        return step

    return {"stock": gradients_of(stock), "blocked": gradients_of(blocked)}


class AttentionMemory(common.Benchmark):
    name = "attention_memory"
    what = (
        "one attention application's forward + backward (12 heads of 64, batch 1, float32, "
        "XLA on CPU): stock [B, N, S, S] scores vs blocked (128 keys a block)"
    )
    isolated = False  # both paths in this process, one after the other, threads pinned

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--repeats", type=int, default=None, help="timed steps (5; smoke 2)")

    def configure(self, args: argparse.Namespace) -> None:
        args.repeats = args.repeats or (2 if args.smoke else 5)
        args.lengths = (128, 256) if args.smoke else (512, 1024, 2048)
        args.heads = 2 if args.smoke else HEADS
        # Before TensorFlow loads.
        os.environ.update(common.thread_env(os.cpu_count() or 1, 1, "default"))

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "shape": {"batch": BATCH, "heads": args.heads, "head_dim": HEAD_DIM},
            "block_size": BLOCK,
            "dtype": "float32",
            "memory": "XLA:CPU buffer assignment (preallocated temporaries), "
            "albert_tf.training.compiled_memory",
        }

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        report["results"] = {}
        report["timings"] = {}
        for seq in args.lengths:
            result = yield Job(f"S={seq}", {"seq": seq}, label=f"S={seq}")
            report["results"][f"S={seq}"] = result.pop("summary", result)
            report["timings"][f"S={seq}"] = result

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        common.pin_tf_threads(os.cpu_count() or 1, 1)
        import numpy as np
        import tensorflow as tf

        from albert_tf.training.compiled_memory import compiled_memory

        seq, heads = args.seq, args.heads
        shape = (BATCH, heads, seq, HEAD_DIM)
        rng = np.random.RandomState(0)
        q, k, v, upstream = (tf.constant(rng.randn(*shape).astype("float32")) for _ in range(4))
        q = q / np.sqrt(HEAD_DIM)
        allowed = tf.constant(np.arange(seq)[None, None, None, :] < seq - seq // 8)  # padding
        inputs = (q, k, v, upstream, allowed)
        square = BATCH * heads * seq * seq * 4
        timings: dict[str, Any] = {}
        summary: dict[str, Any] = {"scores_MiB": round(square / MIB, 1)}
        for name, fn in _step_functions().items():
            memory = compiled_memory(fn, *inputs)
            compiled = tf.function(fn, jit_compile=True)

            def step(compiled=compiled) -> float:
                return float(compiled(*inputs)[0][0, 0, 0, 0].numpy())

            timing = common.time_step(step, warmup=1, repeats=args.repeats)
            timings[name] = {
                **timing,
                "temp_bytes": memory.temp_bytes,
                "largest_temporaries": [list(t) for t in memory.largest_temporaries],
            }
            summary[f"{name}_ms"] = round(timing["median_s"] * 1e3, 1)
            summary[f"{name}_temp_MiB"] = round(memory.temp_bytes / MIB, 1)
        summary["blocked/stock time"] = round(summary["blocked_ms"] / summary["stock_ms"], 2)
        summary["blocked/stock temp"] = round(
            summary["blocked_temp_MiB"] / summary["stock_temp_MiB"], 3
        )
        return {"summary": summary, **timings}

    def table(self, report: dict[str, Any]) -> str:
        lines = [
            "| S | [B,N,S,S] MiB | stock ms | blocked ms | stock temp MiB | blocked temp MiB |",
            "|---|---|---|---|---|---|",
        ]
        for seq, r in report["results"].items():
            if "stock_ms" not in r:
                lines.append(f"| {seq} | failed: {r.get('error', '?')} | | | | |")
                continue
            lines.append(
                f"| {seq} | {r['scores_MiB']} | {r['stock_ms']} | {r['blocked_ms']} "
                f"| {r['stock_temp_MiB']} | {r['blocked_temp_MiB']} |"
            )
        return "\n".join(lines)


if __name__ == "__main__":
    common.main(AttentionMemory())
