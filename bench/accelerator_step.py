"""Pretraining steps on the devices TensorFlow finds: examples/s, MFU, input headroom.

    .venv/bin/python -m bench.accelerator_step --model=base --global_batch=512 --seq_length=128
    .venv/bin/python -m bench.accelerator_step --model=large --global_batch=256 --seq_length=512
    .venv/bin/python -m bench.accelerator_step --smoke   # tiny shapes on CPU: the plumbing

For a machine with GPUs or a TPU (and for us, when one exists). Everything the
``pretrain`` command would choose is chosen the same way (`albert_tf.training.devices`):
the strategy (mirrored over all GPUs, TPU with ``--tpu``), the precision and XLA,
unless given. The step is the package's own (`PretrainingSteps.train_loop`, the
trainer's model and LAMB), fed by the package's input pipeline from synthetic
full-length shards, ``--steps_per_loop`` steps a call. Reported:

* ``examples_per_second`` of the timed loops and the model FLOP/s they imply;
* ``mfu``: those FLOP/s over the device's own matmul peak, measured in the same run
  (square matmuls in the step's precision, on each replica's device at once);
* ``input_examples_per_second``: what one host's input pipeline (read, mask, batch)
  delivers, beside what the step consumes: below it, the host starves the devices
  (then see docs/pretraining.md, tf.data service);
* ``peers``: keras-hub's ALBERT on the same shape and batch, where installed
  (``--peers``; one device, its own ``compile``/``fit``-free train step).

Results go to ``bench/results/accelerator_step_<device>.json`` (``--smoke``: the temp dir).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

from bench import common
from bench.common import Job, Steps

MODELS = {"base": "albert_base_v2", "large": "albert_large_v2"}


def _shape(args, config):
    from bench.step_workload import Shape

    return Shape(
        vocab=config.vocab_size, embed=config.embedding_size, hidden=config.hidden_size,
        layers=config.num_hidden_layers, heads=config.num_attention_heads,
        ffn=config.intermediate_size, batch=args.global_batch, seq=args.seq_length,
        predictions=max(1, round(0.15 * args.seq_length)),
    )  # fmt: skip


def _matmul_peak(strategy, precision: str, smoke: bool) -> float:
    """Best FLOP/s of one square matmul run on every replica's device at once."""
    import tensorflow as tf

    dtype = {"float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16}[precision]
    size = 256 if smoke else 4096
    with strategy.scope():
        a = tf.Variable(tf.cast(tf.random.normal((size, size)), dtype))

    @tf.function
    def run():
        return strategy.run(lambda: tf.reduce_sum(tf.linalg.matmul(a, a)[:1, :1]))

    run()
    best = float("inf")
    for _ in range(3 if smoke else 10):
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), strategy.experimental_local_results(run()))
        best = min(best, time.perf_counter() - start)
    return strategy.num_replicas_in_sync * 2 * size**3 / best


def _peer_keras_hub(shape, precision: str, jit: bool, steps: int) -> dict:
    from bench.step_peers import build_keras_hub_step

    step, info = build_keras_hub_step(
        shape, precision if precision != "float16" else "float32", jit
    )
    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = (time.perf_counter() - start) / steps
    return {"examples_per_second": shape.batch / seconds, **info}


def run(args) -> dict:
    import keras

    import albert_tf
    from albert_tf.training.devices import Devices, auto_jit_compile
    from albert_tf.training.precision import resolve_precision
    from albert_tf.training.pretraining.options import PretrainingOptions
    from albert_tf.training.pretraining.steps import PretrainingSteps
    from albert_tf.training.pretraining.trainer import build_inputs, build_model, build_optimizer
    from albert_tf.training.strategies import create_strategy
    from bench.input_pipeline import measure, synthetic_vocab, write_synthetic_shards
    from bench.step_workload import albert_training_flops, flops_args

    devices = Devices.detect()
    strategy = create_strategy("auto", args.tpu, devices=devices)
    devices = Devices.detect(strategy)
    precision = resolve_precision(args.precision, devices=devices)
    jit = auto_jit_compile(devices) if args.jit_compile == "auto" else args.jit_compile == "on"
    if args.smoke:
        config = albert_tf.AlbertConfig(
            vocab_size=30000, embedding_size=16, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=128, max_position_embeddings=64,
        )  # fmt: skip
    else:
        config = albert_tf.get_preset(MODELS[args.model])
    shape = _shape(args, config)
    workdir = tempfile.mkdtemp()
    replicas = strategy.num_replicas_in_sync
    pattern = write_synthetic_shards(
        workdir, args.seq_length, num_examples=max(64, 4 * args.global_batch)
    )
    synthetic_vocab().save(workdir)
    options = PretrainingOptions(
        model_dir=os.path.join(workdir, "model"), train_files=pattern,
        max_seq_length=args.seq_length, train_batch_size=args.global_batch,
        num_train_steps=10_000, num_warmup_steps=100, precision=precision, jit_compile=jit,
        steps_per_loop=args.steps_per_loop, progress_bar=False,
    )  # fmt: skip
    options.validate(replicas)
    keras.utils.set_random_seed(options.seed)
    with strategy.scope():
        model = build_model(config, options)
        steps = PretrainingSteps(model, build_optimizer(options), strategy, options)
    dataset = build_inputs(options, replicas)
    iterator = iter(dataset)
    loops = args.loops
    steps.train_loop(iterator, args.steps_per_loop)  # trace and warm up
    int(steps.train_loop(iterator, args.steps_per_loop)["applied_steps"])
    start = time.perf_counter()
    applied = 0
    for _ in range(loops):
        applied += int(steps.train_loop(iterator, args.steps_per_loop)["applied_steps"])
    seconds = time.perf_counter() - start
    examples_per_second = args.global_batch * loops * args.steps_per_loop / seconds
    flops = albert_training_flops(**flops_args(shape))
    achieved = flops * loops * args.steps_per_loop / seconds
    peak = _matmul_peak(strategy, precision, args.smoke)
    input_rate = measure(dataset, args.global_batch, num_batches=3 if args.smoke else 30, warmup=1)
    result = {
        "devices": devices.describe(),
        "device_kind": "tpu" if devices.tpu else "gpu" if devices.gpus else "cpu",
        "strategy": type(strategy).__name__,
        "replicas": replicas,
        "precision": precision,
        "jit_compile": jit,
        "model": "smoke" if args.smoke else MODELS[args.model],
        "global_batch": args.global_batch,
        "seq_length": args.seq_length,
        "steps_per_loop": args.steps_per_loop,
        "steps_timed": loops * args.steps_per_loop,
        "applied_steps": applied,
        "examples_per_second": examples_per_second,
        "model_tflops_per_second": achieved / 1e12,
        "matmul_peak_tflops_per_second": peak / 1e12,
        "mfu": achieved / peak,
        "input_examples_per_second": input_rate,
        "input_headroom": input_rate / examples_per_second,
    }
    if args.peers:
        try:
            result["peers"] = {
                "keras_hub": _peer_keras_hub(shape, precision, jit, 2 if args.smoke else 10)
            }
        except Exception as e:  # an optional peer: reported, not fatal
            result["peers"] = {"keras_hub": {"error": f"{type(e).__name__}: {e}"[:500]}}
    return result


class AcceleratorStep(common.Benchmark):
    name = "accelerator_step"
    what = "pretraining steps on the devices TensorFlow finds: examples/s, MFU, input headroom"
    isolated = False  # the devices are this process's

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--model", choices=sorted(MODELS), default="base")
        parser.add_argument("--global_batch", type=int, default=None, help="512 (smoke 4)")
        parser.add_argument("--seq_length", type=int, default=None, help="128 (smoke 32)")
        parser.add_argument("--steps_per_loop", type=int, default=None, help="20 (smoke 2)")
        parser.add_argument("--loops", type=int, default=None, help="timed loops, 5 (smoke 2)")
        parser.add_argument(
            "--precision", default="auto", choices=("auto", "float32", "bfloat16", "float16")
        )
        parser.add_argument("--jit_compile", default="auto", choices=("auto", "on", "off"))
        parser.add_argument("--tpu", default=None, help="TPU name or address (--tpu=local on a VM)")
        parser.add_argument("--peers", action="store_true", help="keras-hub on the same shape")

    def configure(self, args: argparse.Namespace) -> None:
        smoke = args.smoke
        args.global_batch = args.global_batch or (4 if smoke else 512)
        args.seq_length = args.seq_length or (32 if smoke else 128)
        args.steps_per_loop = args.steps_per_loop or (2 if smoke else 20)
        args.loops = args.loops or (2 if smoke else 5)

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"benchmark": self.name}

    def result_name(self, args: argparse.Namespace, report: dict[str, Any]) -> str:
        return f"{self.name}_{report.get('device_kind', 'unknown')}"

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        report.update((yield Job("step", label="pretraining step")))

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        return run(args)

    def table(self, report: dict[str, Any]) -> str:
        r = report
        return "\n".join(
            [
                f"{r['devices']}; {r['strategy']} × {r['replicas']}; "
                f"{r['precision']}; XLA {'on' if r['jit_compile'] else 'off'}",
                f"{r['model']}, global batch {r['global_batch']} × {r['seq_length']}",
                f"step: {r['examples_per_second']:.1f} examples/s, "
                f"{r['model_tflops_per_second']:.3f} model TFLOP/s, "
                f"MFU {100 * r['mfu']:.1f}% of a measured "
                f"{r['matmul_peak_tflops_per_second']:.3f} TFLOP/s matmul peak",
                f"input pipeline (one host): {r['input_examples_per_second']:.1f} examples/s "
                f"= {r['input_headroom']:.1f}x what the step consumes",
            ]
            + [
                f"peer {name}: "
                + (
                    f"{peer['examples_per_second']:.1f} examples/s"
                    if "examples_per_second" in peer
                    else peer.get("error", "?")
                )
                for name, peer in r.get("peers", {}).items()
            ]
        )


if __name__ == "__main__":
    common.main(AcceleratorStep())
