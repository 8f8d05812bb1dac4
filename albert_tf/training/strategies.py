"""`tf.distribute` strategies by name, for CPU, GPU and TPU."""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf.training.choices import STRATEGIES
from albert_tf.training.devices import Devices, auto_strategy, cluster_workers

#: The bound on one collective (an all-reduce) of a multi-worker run, in seconds.
DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 600.0

#: What a lost worker is noticed by (TensorFlow's coordination service default).
HEARTBEAT_TIMEOUT_NOTE = "the coordination service's heartbeat timeout (about 10 s)"


class WorkerLostError(RuntimeError):
    """A worker of a multi-worker run stopped answering; restart them all."""


def create_strategy(
    name: str,
    tpu_address: str | None = None,
    collective_timeout_seconds: float = DEFAULT_COLLECTIVE_TIMEOUT_SECONDS,
    devices: Devices | None = None,
) -> tf.distribute.Strategy:
    """Returns the strategy ``name`` names.

    * ``auto``: `albert_tf.training.devices.auto_strategy` of ``devices`` (found
      if not given) and of the ``TF_CONFIG`` environment variable: TPU with
      ``tpu_address`` or an attached TPU (address ``local``, as on a TPU VM),
      ``multi_worker_mirrored`` when ``TF_CONFIG``'s cluster lists several
      chief and worker tasks, mirrored over several GPUs, else ``default``.
    * ``default``: no distribution (the current default strategy).
    * ``one_device``: one GPU if present, else the CPU.
    * ``mirrored``: every local GPU (or the CPU), synchronous all-reduce.
    * ``multi_worker_mirrored``: workers described by the ``TF_CONFIG``
      environment variable, synchronous collective all-reduce. A dead worker
      is noticed by the coordination service's heartbeats (about 10 s); a
      live one that stops taking part (a hung host) by
      ``collective_timeout_seconds`` on each all-reduce (0: no bound).
    * ``tpu``: a TPU found through `TPUClusterResolver(tpu_address)`.
    """
    if name == "auto":
        devices = devices or Devices.detect()
        name = auto_strategy(devices, tpu_address, cluster_workers(os.environ.get("TF_CONFIG")))
        if name == "tpu" and not tpu_address:
            tpu_address = "local"  # the TPU attached to this host
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
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=collective_timeout_seconds or None,
            implementation=collective_implementation(devices or Devices.detect()),
        )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {name!r}; expected one of {STRATEGIES}.")


def collective_implementation(
    devices: Devices,
) -> tf.distribute.experimental.CommunicationImplementation:
    """NCCL for multi-worker GPU all-reduces (TensorFlow uses it only when asked),
    TensorFlow's own choice elsewhere.

    >>> collective_implementation(Devices(gpus=((8, 0),))).name
    'NCCL'
    >>> collective_implementation(Devices()).name
    'AUTO'
    """
    implementation = tf.distribute.experimental.CommunicationImplementation
    return implementation.NCCL if devices.gpus else implementation.AUTO


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
    """This process's place among the workers, 0 to `num_workers` - 1, in the order
    of their replicas: a chief task first, then the workers by task id."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 0
    task_id = int(resolver.task_id or 0)
    if resolver.task_type == "chief":
        return 0
    return task_id + 1 if "chief" in _cluster(resolver) else task_id


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """How many worker processes train together (1 unless multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    cluster = _cluster(resolver)
    return max(1, len(cluster.get("worker", [])) + len(cluster.get("chief", [])))


def agreed_minimum(strategy: tf.distribute.Strategy, value: int) -> int:
    """The least of every worker's ``value``, the same number on every worker: one
    all-gather, so every worker must call it at the same point of the run. One
    process: ``value``."""
    if num_workers(strategy) == 1:
        return value

    @tf.function
    def gather():
        per_replica = strategy.run(lambda: tf.constant([value], tf.int64))
        return tf.reduce_min(strategy.gather(per_replica, axis=0))

    return int(gather())


def _cluster(resolver) -> dict:
    spec = resolver.cluster_spec().as_dict()
    if spec:
        return spec
    return json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})


def worker_lost_message(error: tf.errors.OpError, step: int, resume_step: int) -> str:
    """What a survivor of a lost worker says: what happened, which bound
    applied, and how to go on."""
    reason = " ".join(str(error.message).split())
    if isinstance(error, tf.errors.DeadlineExceededError):
        bound = "the collective timeout (--collective_timeout_seconds) expired"
    elif "heartbeat" in reason:
        bound = f"{HEARTBEAT_TIMEOUT_NOTE} expired"
    else:
        bound = "its connection closed"
    for marker in ("unhealthy", "Connection reset", "Deadline", "Collective ops is aborted"):
        at = reason.find(marker)
        if at >= 0:
            reason = reason[at : at + 200]
            break
    else:
        reason = reason[:200]
    return (
        f"lost a worker during step {step + 1}: {bound} ({type(error).__name__}: {reason}). "
        f"Restart every worker with the same command: they resume together from the "
        f"last checkpoint, step {resume_step}."
    )
