"""Host work per pretraining step: eager executions and device-to-host reads.

    .venv/bin/python -m bench.host_work            # ~5 min: 1, 2, 8 replicas; 1, 10 steps a loop
    .venv/bin/python -m bench.host_work --smoke    # 1 and 2 replicas, fewer steps

An accelerator idles while the host dispatches eager ops or waits on a value it
reads back. For each replica count (logical CPU devices under
`tf.distribute.MirroredStrategy`, one process each) this trains a tiny ALBERT with
`PretrainingTrainer` and counts, over the steps after warm-up:

* ``eager_executions``: every op or `tf.function` the host dispatches eagerly, read
  from TensorFlow's own debug-event dump (``enable_dump_debug_info``, mode
  NO_TENSOR), which records each eager execution with its op type;
* ``host_reads``: every eager tensor read back into Python (``.numpy()``, ``float()``,
  ``int()``, ``bool()``): each waits for the device to finish.

Counts do not depend on the machine's speed, so they compare across runs; the
milliseconds per step are this CPU's and only compare within a run.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time
from typing import Any

from bench import common
from bench.common import Job, Steps

# Counted steps follow a warm-up of whole metrics intervals (every 10 steps).
WARMUP = 10


def _worker(replicas: int, steps: int, warmup: int, steps_per_loop: int) -> dict:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * replicas
    )
    from tensorflow.python.debug.lib import debug_events_reader
    from tensorflow.python.framework import ops

    from albert_tf.config import AlbertConfig
    from albert_tf.data.preparation import prepare_pretraining_data
    from albert_tf.training.pretraining.hooks import TrainerHook
    from albert_tf.training.pretraining.options import PretrainingOptions
    from albert_tf.training.pretraining.trainer import PretrainingTrainer

    work = tempfile.mkdtemp()
    prepared = prepare_pretraining_data(
        "sample:en", os.path.join(work, "data"), vocab_size=800, max_seq_length=64,
        dupe_factor=1, num_shards=2, log=lambda *_: None,
    )  # fmt: skip
    config = AlbertConfig(
        vocab_size=800, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    options = PretrainingOptions(
        os.path.join(work, "run"), prepared.train_files, max_seq_length=64,
        train_batch_size=8 * replicas, num_train_steps=warmup + steps, num_warmup_steps=1,
        save_checkpoints_steps=10_000, log_every_steps=10, progress_bar=False,
        precision="float32", jit_compile=False, steps_per_loop=steps_per_loop,
    )  # fmt: skip
    reads = collections.Counter()
    original = ops._EagerTensorBase._numpy
    counting = {"on": False}

    def counted(self):
        if counting["on"]:
            reads["host_reads"] += 1
        return original(self)

    dump = os.path.join(work, "dump")

    class Window(TrainerHook):
        def on_step_end(self, step: int) -> None:
            if step == warmup:
                tf.debugging.experimental.enable_dump_debug_info(
                    dump, tensor_debug_mode="NO_TENSOR", circular_buffer_size=-1
                )
                counting["on"] = True
                self.start = time.perf_counter()
            elif step == warmup + steps:
                counting["on"] = False
                self.seconds = time.perf_counter() - self.start
                tf.debugging.experimental.disable_dump_debug_info()

    ops._EagerTensorBase._numpy = counted
    strategy = (
        tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
        if replicas > 1
        else tf.distribute.get_strategy()
    )
    window = Window()
    trainer = PretrainingTrainer(config, options, strategy, hooks=[window])
    trainer.train(log=lambda *_: None)
    with debug_events_reader.DebugDataReader(dump) as reader:
        reader.update()
        executions = [e.op_type for e in reader.executions()]
    by_type = collections.Counter(executions)
    return {
        "replicas": replicas,
        "steps_per_loop": steps_per_loop,
        "steps_counted": steps,
        "eager_executions_per_step": len(executions) / steps,
        "host_reads_per_step": reads["host_reads"] / steps,
        "ms_per_step_with_counting": 1000 * window.seconds / steps,
        "eager_executions_by_type": dict(by_type.most_common(25)),
    }


class HostWork(common.Benchmark):
    name = "host_work"
    what = "eager executions and host reads per pretraining step, 1/2/8 logical CPU replicas"

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--replicas", default="1,2,8", help="comma-separated (smoke: 1,2)")
        parser.add_argument("--steps", type=int, default=20, help="counted steps (smoke 10)")
        parser.add_argument("--steps_per_loop", default="1,10", help="comma-separated")

    def configure(self, args: argparse.Namespace) -> None:
        # Windows of whole metrics intervals (every 10 steps), so loops fill them.
        if args.smoke:
            args.steps, args.replicas = 10, "1,2"
        args.replicas = [int(r) for r in args.replicas.split(",")]
        args.steps_per_loop = [int(k) for k in args.steps_per_loop.split(",")]

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"benchmark": self.name, "steps": args.steps, "results": []}

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for k in args.steps_per_loop:
            for n in args.replicas:
                job = Job(f"{n}:{k}", {"replica_count": n, "loop": k}, f"{n} replicas, {k}/loop")
                report["results"].append((yield job))

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        return _worker(args.replica_count, args.steps, WARMUP, args.loop)

    def table(self, report: dict[str, Any]) -> str:
        lines = [
            "replicas  steps/loop  eager executions/step  host reads/step  ms/step (counting on)"
        ]
        for row in report["results"]:
            if "error" in row:
                lines.append(f"{row.get('replicas', '?'):>8}  error: {row['error']}")
                continue
            lines.append(
                f"{row['replicas']:>8}  {row['steps_per_loop']:>10}  "
                f"{row['eager_executions_per_step']:>21.1f}  "
                f"{row['host_reads_per_step']:>15.1f}  {row['ms_per_step_with_counting']:>8.1f}"
            )
        return "\n".join(lines)


if __name__ == "__main__":
    common.main(HostWork())
