"""Gradient all-reduce between two worker processes: ALBERT-base against not-shared.

    .venv/bin/python -m bench.communication            # ~5 min on 2 busy cores
    .venv/bin/python -m bench.communication --smoke    # tiny model, checks the plumbing

Two real processes on loopback run `tf.distribute.MultiWorkerMirroredStrategy`
(a ``TF_CONFIG`` each, ring all-reduce over gRPC), one replica each. For
ALBERT-base (12 layers sharing one set of weights) and the same shape with no sharing
(BERT-base-shaped: the same FLOPs, 7.6× the trainable parameters), both workers
started together as one job of the runner (`bench.common.Job` with two
environments), each worker times these variants (``--variants``):

============  ==========================================================================
variant       what one step runs
============  ==========================================================================
compute       forward + backward of MLM + SOP on the worker's batch, no collective
reduce        one all-reduce of gradient-shaped float32 tensors, nothing else
compute+1ar   compute, then one all-reduce of every gradient
compute+2ar   compute, then two all-reduces in a row (`trainer` before the fix: its own
              all-reduce before clipping, then Keras' inside `optimizer.apply`)
trainer       the package's training step (`PretrainingSteps.train_fn`: all-reduce,
              clipping, LAMB)
============  ==========================================================================

Bytes all-reduced per gradient all-reduce = trainable parameters × 4 (float32). A
ring all-reduce over n workers sends 2·(n−1)/n of those bytes from every worker (and
receives as many): the bytes per worker hardly grow with n, the number of sequential
transfers (2·(n−1)) does. ``(compute+1ar − compute) / compute+1ar`` is the share of a
step spent in the collective. The ``CollectiveReduce`` ops of each traced step and
the bytes of their inputs are counted too (`all_reduced_bytes`): what a step sends is
read from its graph, not assumed. Loopback on one 2-core machine is no network: the
figures show how the cost scales with parameter bytes, not what a cluster would see.
Writes ``bench/results/communication.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from typing import Any

from bench import common
from bench.common import Job, Steps, fmt, time_step

MODELS = ("albert_base", "not_shared")
SHARE = {"albert_base": "all", "not_shared": "none"}
VARIANTS = ("compute", "reduce", "compute+1ar", "compute+2ar", "trainer")
WORKERS = 2


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


# --------------------------------------------------------------------------- worker
def all_reduced_bytes(concrete) -> dict[str, int]:
    """Collective all-reduce ops in a traced step (nested function bodies included)
    and the bytes of their inputs: what one call all-reduces, read from the graph."""
    seen, ops, total = set(), 0, 0
    pending = [concrete.graph]
    while pending:
        graph = pending.pop()
        for op in graph.get_operations():
            if op.type.startswith("CollectiveReduce"):
                ops += 1
                tensor = op.inputs[0]
                total += tensor.shape.num_elements() * tensor.dtype.size
        for name, function in getattr(graph, "_functions", {}).items():
            if name not in seen and hasattr(function, "graph"):
                seen.add(name)
                pending.append(function.graph)
    return {"all_reduce_ops": ops, "all_reduced_bytes": total}


def _config(model: str, smoke: bool):
    import albert_tf

    if smoke:
        # V stays 30000: the trainer variant reads bench/input_pipeline's synthetic shards.
        base = albert_tf.AlbertConfig(
            vocab_size=30000,
            embedding_size=16,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
        )
    else:
        base = albert_tf.get_preset("albert_base_v2")
    return base.replace(share=SHARE[model], classifier_dropout_prob=0.0)


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf.models.pretraining_model import AlbertPretrainingModel
    from albert_tf.training.pretraining.options import PretrainingOptions
    from albert_tf.training.pretraining.trainer import PretrainingTrainer
    from bench.input_pipeline import synthetic_vocab, write_synthetic_shards
    from bench.step_workload import FULL, SMOKE, synthetic_batch

    tf.config.threading.set_intra_op_parallelism_threads(args.worker_threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)  # collectives wait on one
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
    )
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    shape = SMOKE if args.smoke else FULL
    shape = type(shape)(**{**shape.__dict__, "batch": args.batch_per_worker, "vocab": 30000})
    config = _config(args.model, args.smoke)
    data = synthetic_batch(shape, seed=index)
    features = {k: tf.constant(data[k]) for k in ("token_ids", "segment_ids", "padding_mask")}
    features["mask_positions"] = tf.constant(data["mask_positions"])
    labels = {k: tf.constant(data[k]) for k in ("mask_ids", "sentence_order_label")}

    with strategy.scope():
        model = AlbertPretrainingModel.from_albert_config(config)
        model(features)
    variables = model.trainable_variables
    parameters = int(sum(np.prod(v.shape) for v in variables))
    # Stand-ins for gradients, local to this worker (outside the strategy's scope).
    buffers = [tf.Variable(tf.ones(v.shape, tf.float32), trainable=False) for v in variables]

    def gradients():
        with tf.GradientTape() as tape:
            out = model(features, training=True)
            mlm = keras.losses.sparse_categorical_crossentropy(
                labels["mask_ids"], out["mlm_logits"], from_logits=True
            )
            sop = keras.losses.sparse_categorical_crossentropy(
                labels["sentence_order_label"], out["sop_logits"], from_logits=True
            )
            loss = tf.reduce_mean(mlm) + tf.reduce_mean(sop)
        return loss, tape.gradient(loss, variables)

    def done(loss, tensors):
        # Every tensor is computed, none is summed: the step costs what it says.
        with tf.control_dependencies(tensors):
            return tf.identity(loss)

    def compute():
        loss, grads = gradients()
        return done(loss, grads)

    def compute_all_reduce():
        loss, grads = gradients()
        ctx = tf.distribute.get_replica_context()
        return done(loss, ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads))

    def compute_two_all_reduces():
        loss, grads = gradients()
        ctx = tf.distribute.get_replica_context()
        once = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        return done(loss, ctx.all_reduce(tf.distribute.ReduceOp.SUM, once))

    def reduce_only():
        ctx = tf.distribute.get_replica_context()
        reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [b.read_value() for b in buffers])
        return done(tf.constant(0.0), reduced)

    functions = {}

    def local(name, fn):
        functions[name] = tf.function(lambda: strategy.run(fn))

        def step() -> float:
            return float(strategy.experimental_local_results(functions[name]())[0])

        return step

    barrier = tf.function(
        lambda: strategy.reduce(
            tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None
        )
    )
    steps = {
        "compute": local("compute", compute),
        "reduce": local("reduce", reduce_only),
        "compute+1ar": local("compute+1ar", compute_all_reduce),
        "compute+2ar": local("compute+2ar", compute_two_all_reduces),
    }
    results: dict[str, Any] = {}
    for name in args.variants:
        if name == "trainer":
            continue
        barrier()  # both workers start the variant together
        results[name] = time_step(steps[name], warmup=args.warmup, repeats=args.repeats)
        results[name].update(all_reduced_bytes(functions[name].get_concrete_function()))

    if "trainer" in args.variants:
        workdir = tempfile.mkdtemp(prefix=f"communication_{index}_")
        pattern = write_synthetic_shards(workdir, shape.seq, num_examples=8 * WORKERS * shape.batch)
        synthetic_vocab().save(workdir)
        options = PretrainingOptions(
            model_dir=os.path.join(workdir, "model"),
            train_files=pattern,
            max_seq_length=shape.seq,
            max_predictions_per_seq=shape.predictions,
            train_batch_size=WORKERS * shape.batch,
            num_train_steps=1000,
            num_warmup_steps=10,
            precision="float32",
            progress_bar=False,
        )
        trainer = PretrainingTrainer(config, options, strategy)
        batch = next(trainer.train_iterator)

        def trainer_step() -> float:
            out = trainer.steps.train_fn(*batch)
            return float(out["mlm_loss_sum"])

        barrier()
        results["trainer"] = time_step(trainer_step, warmup=args.warmup, repeats=args.repeats)
        results["trainer"].update(
            all_reduced_bytes(trainer.steps.train_fn.get_concrete_function(*batch))
        )
    return {
        "model": args.model,
        "worker": index,
        "share": config.share,
        "trainable_parameters": parameters,
        "gradient_bytes": 4 * parameters,
        "batch_per_worker": shape.batch,
        "seq": shape.seq,
        "variants": results,
    }


# --------------------------------------------------------------------------- runner
def _pair_envs(args: argparse.Namespace) -> tuple[dict[str, str], ...]:
    """Both workers' environments: one cluster on free loopback ports, a task each."""
    ports = _free_ports(WORKERS)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    threads = str(args.worker_threads)
    return tuple(
        {
            "TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}
            ),
            "TF_NUM_INTRAOP_THREADS": threads,
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
        }
        for index in range(WORKERS)
    )


def _summary(pair: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over both workers' steps, and the collective's share."""
    import statistics

    chief = pair[0]
    medians = {}
    for variant in VARIANTS:
        times = [t for w in pair for t in w.get("variants", {}).get(variant, {}).get("times_s", [])]
        if times:
            medians[variant] = statistics.median(times)
    out: dict[str, Any] = {
        "trainable_parameters": chief["trainable_parameters"],
        "gradient_bytes": chief["gradient_bytes"],
        # Ring all-reduce: each worker sends (and receives) 2(n-1)/n of the bytes.
        "ring_bytes_sent_per_worker": int(2 * (WORKERS - 1) / WORKERS * chief["gradient_bytes"]),
        "median_step_s": medians,
        # Read from each traced step: includes the trainer's small count all-reduces.
        "all_reduced_bytes_per_step": {
            variant: r["all_reduced_bytes"]
            for variant, r in chief.get("variants", {}).items()
            if "all_reduced_bytes" in r
        },
    }
    if "compute" in medians and "compute+1ar" in medians:
        collective = medians["compute+1ar"] - medians["compute"]
        out["collective_s"] = collective
        out["collective_share_of_step"] = collective / medians["compute+1ar"]
    if "reduce" in medians:
        out["all_reduce_gbit_per_s"] = (
            8 * out["ring_bytes_sent_per_worker"] / medians["reduce"] / 1e9
        )
    return out


def _table(summaries: dict[str, dict[str, Any]]) -> str:
    rows = [
        "| model | parameters | gradient MB | compute s | all-reduce s | compute+1ar s "
        "| collective share | compute+2ar s | trainer step s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model, s in summaries.items():
        m = s["median_step_s"]
        cells = [
            model,
            f"{s['trainable_parameters'] / 1e6:.1f}M",
            f"{s['gradient_bytes'] / 1e6:.0f}",
            fmt(m.get("compute"), ".2f"),
            fmt(m.get("reduce"), ".2f"),
            fmt(m.get("compute+1ar"), ".2f"),
            fmt(s.get("collective_share_of_step"), ".0%"),
            fmt(m.get("compute+2ar"), ".2f"),
            fmt(m.get("trainer"), ".2f"),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


class Communication(common.Benchmark):
    name = "communication"
    what = (
        "gradient all-reduce between 2 worker processes on loopback, "
        "ALBERT-base vs the same shape not shared"
    )
    variants = VARIANTS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
        parser.add_argument("--batch_per_worker", type=int, default=2, help="sequences of 128")
        parser.add_argument("--warmup", type=int, default=2)
        parser.add_argument("--repeats", type=int, default=3)
        parser.add_argument(
            "--worker_threads", type=int, default=1, help="TF intra-op threads per worker (cores/2)"
        )

    def configure(self, args: argparse.Namespace) -> None:
        args.models = common.choices(args.models, MODELS, "model")
        self.start = time.perf_counter()

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "benchmark": self.name,
            "workers": WORKERS,
            "strategy": "MultiWorkerMirroredStrategy, RING, loopback gRPC, one replica per worker",
            # Not the runner's: each worker has its share of the cores (`_pair_envs`).
            "threads": {"tf_intra_op_per_worker": args.worker_threads, "tf_inter_op_per_worker": 2},
            "summaries": {},
            "workers_raw": {},
        }

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for model in args.models:
            job = Job("pair", {"model": model}, f"{model}, {WORKERS} workers", _pair_envs(args))
            pair = (yield job)["processes"]
            report["workers_raw"][model] = pair
            if all("error" not in w for w in pair):
                report["summaries"][model] = _summary(pair)

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        return _worker(args)

    def summarize(self, report: dict[str, Any]) -> None:
        report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        report["wall_s"] = round(time.perf_counter() - self.start, 1)

    def table(self, report: dict[str, Any]) -> str:
        return _table(report["summaries"])


if __name__ == "__main__":
    common.main(Communication())
