"""`tf.distribute` strategies by name, for CPU, GPU and TPU."""

from __future__ import annotations

import json
import os

import tensorflow as tf

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def create_strategy(name: str, tpu_address: str | None = None) -> tf.distribute.Strategy:
    """Returns the strategy ``name`` names.

    * ``default``: no distribution (the current default strategy).
    * ``one_device``: one GPU if present, else the CPU.
    * ``mirrored``: every local GPU (or the CPU), synchronous all-reduce.
    * ``multi_worker_mirrored``: workers described by the ``TF_CONFIG``
      environment variable, synchronous collective all-reduce.
    * ``tpu``: a TPU found through `TPUClusterResolver(tpu_address)`.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker_mirrored":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "--strategy=multi_worker_mirrored needs the TF_CONFIG environment "
                'variable, e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}.'
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {name!r}; expected one of {STRATEGIES}.")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints and summaries to model_dir."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return (
        task_type is None
        or task_type == "chief"
        or (task_type == "worker" and task_id == 0 and "chief" not in _cluster(resolver))
    )


def worker_index(strategy: tf.distribute.Strategy) -> int:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 0
    return int(resolver.task_id or 0)


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """How many worker processes train together (1 unless multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    cluster = _cluster(resolver)
    return max(1, len(cluster.get("worker", [])) + len(cluster.get("chief", [])))


def _cluster(resolver) -> dict:
    spec = resolver.cluster_spec().as_dict()
    if spec:
        return spec
    return json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
