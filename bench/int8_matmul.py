"""Which int8 matmul TensorFlow runs fastest on this CPU, beside float32 and bfloat16.

One of ALBERT-base's feed-forward products at the serving benchmark's batch-1
shape, [1004, 768] × [768, 3072] (4 options × 251 pieces), through every path
the TF runtime offers:

* float32 and bfloat16 ``MatMul``;
* Keras 3's ``Dense.quantize("int8")`` (what ``model.quantize("int8")`` does);
* ``BatchMatMulV3`` int8 × int8 → int32 (the op Keras lowers to);
* ``QuantizedMatMul`` (quint8 × qint8 → qint32), ``QuantizedMatMulWithBias`` and
  ``QuantizedMatMulWithBiasAndDequantize`` (oneDNN's u8 × s8 kernels);
* `albert_tf.layers.int8_linear.Int8Linear`: the last one with the dynamic input
  quantisation, per-column scales and shift correction around it;
* weight-only int8: int8 weights cast to float32 or bfloat16 for the matmul.

Writes ``bench/results/int8_matmul.json`` and prints a table::

    python -m bench.int8_matmul
    python -m bench.int8_matmul --smoke   # 2 timed calls a path, output in /tmp
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from bench import common
from bench.common import Job, Steps

M, K, N = 1004, 768, 3072


def paths() -> dict[str, Any]:
    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf.layers.int8_linear import Int8Linear

    rng = np.random.RandomState(0)
    x = tf.constant(rng.randn(M, K).astype("float32"))
    w = tf.constant((rng.randn(K, N) * 0.05).astype("float32"))
    b = tf.zeros([N])
    xb, wb = tf.cast(x, tf.bfloat16), tf.cast(w, tf.bfloat16)
    xi = tf.cast(tf.clip_by_value(tf.round(x * 30), -127, 127), tf.int8)
    wi = tf.cast(tf.clip_by_value(tf.round(w * 2500), -127, 127), tf.int8)
    xu = tf.bitcast(tf.cast(tf.cast(xi, tf.int32) + 128, tf.uint8), tf.quint8)
    wq = tf.bitcast(wi, tf.qint8)
    ranges = {"min_a": 0.0, "max_a": 1.0, "min_b": -1.0, "max_b": 1.0}
    dense = keras.layers.Dense(N)
    dense.build((None, K))
    dense.quantize("int8")
    linear = Int8Linear(w, b)
    return {
        "float32 MatMul": (lambda: tf.matmul(x, w)),
        "bfloat16 MatMul": (lambda: tf.matmul(xb, wb)),
        "Keras Dense.quantize('int8')": (lambda: dense(x)),
        "BatchMatMulV3 int8 -> int32": (
            lambda: tf.raw_ops.BatchMatMulV3(x=xi, y=wi, Tout=tf.int32)
        ),
        "QuantizedMatMul": (
            lambda: tf.raw_ops.QuantizedMatMul(a=xu, b=wq, Toutput=tf.qint32, **ranges)[0]
        ),
        "QuantizedMatMulWithBias": (
            lambda: tf.raw_ops.QuantizedMatMulWithBias(
                a=xu, b=wq, bias=b, Toutput=tf.qint32, **ranges
            )[0]
        ),
        "QuantizedMatMulWithBiasAndDequantize": (
            lambda: tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
                a=xu,
                b=wq,
                bias=b,
                min_freezed_output=0.0,
                max_freezed_output=0.0,
                Toutput=tf.float32,
                input_quant_mode="SCALED",
                **ranges,
            )
        ),
        "Int8Linear (dynamic input quantisation)": (lambda: linear(x)),
        "weight-only int8 -> float32": (lambda: tf.matmul(x, tf.cast(wi, tf.float32))),
        "weight-only int8 -> bfloat16": (lambda: tf.matmul(xb, tf.cast(wi, tf.bfloat16))),
    }


class Int8Matmul(common.Benchmark):
    name = "int8_matmul"
    what = "one ALBERT-base FFN matmul through every int8 path TF has, vs float32 and bfloat16"
    isolated = False  # the paths one after another in this process, threads pinned

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--repeats", type=int, default=None, help="timed calls (20; smoke 2)")

    def configure(self, args: argparse.Namespace) -> None:
        args.repeats = args.repeats or (2 if args.smoke else 20)
        # Before TensorFlow loads.
        os.environ.update(common.thread_env(os.cpu_count() or 1, 1, "default"))

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"shape": [M, K, N]}

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        report["results"] = yield Job("paths", label="int8 matmul paths")

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        common.pin_tf_threads(os.cpu_count() or 1, 1)
        import tensorflow as tf

        results: dict[str, Any] = {}
        for name, fn in paths().items():
            graph = tf.function(fn)
            try:
                graph().numpy()
            except (tf.errors.OpError, ValueError, TypeError) as error:
                results[name] = {"error": str(error).splitlines()[0][:200]}
                continue
            graph().numpy()
            start = time.perf_counter()
            for _ in range(args.repeats):
                out = graph()
            out.numpy()
            seconds = (time.perf_counter() - start) / args.repeats
            results[name] = {
                "ms": round(seconds * 1e3, 2),
                "gflops": round(2 * M * K * N / seconds / 1e9, 1),
            }
        base = results["float32 MatMul"]["ms"]
        for r in results.values():
            if "ms" in r:
                r["speedup_over_float32"] = round(base / r["ms"], 2)
        return results

    def table(self, report: dict[str, Any]) -> str:
        lines = [
            f"[{M}, {K}] x [{K}, {N}], {report['machine']['cores']} threads\n",
            "| path | ms | GFLOP/s | vs float32 |\n|---|---|---|---|",
        ]
        for name, r in report["results"].items():
            if "ms" in r:
                lines.append(
                    f"| {name} | {r['ms']} | {r['gflops']} | {r['speedup_over_float32']}x |"
                )
            else:
                lines.append(f"| {name} | failed: {r['error']} | | |")
        return "\n".join(lines)


if __name__ == "__main__":
    common.main(Int8Matmul())
