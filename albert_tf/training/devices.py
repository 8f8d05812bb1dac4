"""What a run trains on, and the defaults that follow from it.

`Devices` is read once from TensorFlow (`Devices.detect`); every default that
depends on the hardware is a pure function of it, so each choice is tested
with a faked device list (no project machine has a GPU or TPU):

* `auto_strategy`: TPU when an address is given or a TPU is attached (a TPU VM),
  multi-worker mirrored when ``TF_CONFIG`` lists several training tasks (a
  scheduler launched this process as one of several workers), mirrored over
  every local GPU when there are several, one worker's default strategy otherwise.
* `auto_precision`: bfloat16 on TPUs and on GPUs of compute capability 8.0 or
  more (Ampere and later: native bfloat16, no loss scaling), float16 with loss
  scaling on older GPUs, and on CPUs bfloat16 only with bf16 instructions.
* `auto_jit_compile`: XLA on accelerators; off on CPU, where the fused kernels
  (which XLA cannot compile) are faster.

>>> gpus = Devices(gpus=((8, 0),) * 8)
>>> auto_strategy(gpus), auto_precision(gpus), auto_jit_compile(gpus)
('mirrored', 'bfloat16', True)
>>> volta = Devices(gpus=((7, 0),))
>>> auto_strategy(volta), auto_precision(volta)
('default', 'float16')
>>> cpu = Devices(cpu_flags=frozenset({"avx2"}))
>>> auto_strategy(cpu), auto_precision(cpu), auto_jit_compile(cpu)
('default', 'float32', False)
>>> cpu.describe()
'CPU only (no GPU or TPU found)'
>>> auto_strategy(Devices(tpu=True))  # a TPU VM: its TPU, not the host's CPU
'tpu'
>>> tf_config = {"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222"]},
...              "task": {"type": "worker", "index": 0}}
>>> auto_strategy(cpu, workers=cluster_workers(tf_config))
'multi_worker_mirrored'
>>> auto_strategy(gpus, workers=cluster_workers('{"cluster": {"worker": ["h0:2222"]}}'))
'mirrored'
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import tensorflow as tf

from albert_tf.hardware import cpu_flags, nvidia_device_present
from albert_tf.layers.implementations import choose_implementation

#: Compute capability from which a GPU has native bfloat16 (Ampere, A100 = 8.0).
BFLOAT16_COMPUTE_CAPABILITY = (8, 0)
#: CPU features that make bfloat16 matmuls native (oneDNN dispatches to them):
#: AVX-512 BF16 (Cooper Lake, Zen 4+) and AMX (Sapphire Rapids+).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@dataclasses.dataclass(frozen=True)
class Devices:
    """The accelerators this process sees.

    Attributes:
        gpus: one compute capability (major, minor) per local GPU; None where
            TensorFlow does not report it.
        tpu: whether a TPU is attached (a TPU strategy or TPU devices).
        cpu_flags: the CPU's feature flags (`albert_tf.hardware.cpu_flags`).
    """

    gpus: tuple[tuple[int, int] | None, ...] = ()
    tpu: bool = False
    cpu_flags: frozenset[str] = frozenset()

    @classmethod
    def detect(cls, strategy: tf.distribute.Strategy | None = None) -> Devices:
        """Reads physical devices only: listing logical ones would start TensorFlow's
        runtime, after which a multi-worker strategy can no longer set up its
        collectives ("Collective ops must be configured at program startup")."""
        gpus = []
        for device in tf.config.list_physical_devices("GPU"):
            details = tf.config.experimental.get_device_details(device)
            capability = details.get("compute_capability")
            gpus.append(tuple(capability) if capability else None)
        tpu = isinstance(strategy, tf.distribute.TPUStrategy) or bool(
            tf.config.list_physical_devices("TPU")
        )
        return cls(tuple(gpus), tpu, frozenset(cpu_flags()))

    @property
    def accelerator(self) -> bool:
        return bool(self.gpus) or self.tpu

    def describe(self) -> str:
        """One phrase for the start-up line."""
        if self.tpu:
            return "TPU"
        if self.gpus:
            known = sorted({c for c in self.gpus if c})
            capability = ", ".join(f"{a}.{b}" for a, b in known) or "unknown"
            return f"{len(self.gpus)} GPU(s), compute capability {capability}"
        return "CPU only (no GPU or TPU found)"


def cluster_workers(tf_config: Mapping | str | None) -> int:
    """How many processes train together by the ``TF_CONFIG`` given (the dict or its
    JSON text; None or empty: 1): its cluster's ``chief`` and ``worker`` tasks (an
    ``evaluator`` only watches).

    >>> cluster_workers(None), cluster_workers('{"cluster": {"worker": ["a:1", "b:1"]}}')
    (1, 2)
    """
    if not tf_config:
        return 1
    if isinstance(tf_config, str):
        tf_config = json.loads(tf_config)
    cluster = tf_config.get("cluster") or {}
    return max(1, len(cluster.get("chief") or ()) + len(cluster.get("worker") or ()))


def auto_strategy(devices: Devices, tpu_address: str | None = None, workers: int = 1) -> str:
    """The `albert_tf.training.strategies.STRATEGIES` name ``--strategy=auto`` means.

    ``workers``: the processes of the job (`cluster_workers` of ``TF_CONFIG``); more
    than one means they train as one multi-worker job, not each alone. A TPU comes
    first: multi-worker mirrored cannot drive one.
    """
    if tpu_address or devices.tpu:
        return "tpu"
    if workers > 1:
        return "multi_worker_mirrored"
    if len(devices.gpus) > 1:
        return "mirrored"
    return "default"


def auto_precision(devices: Devices) -> str:
    """The precision ``--precision=auto`` means on ``devices``."""
    if devices.tpu:
        return "bfloat16"
    if devices.gpus:
        # The slowest card decides: an unknown capability is taken as old.
        if all(c is not None and c >= BFLOAT16_COMPUTE_CAPABILITY for c in devices.gpus):
            return "bfloat16"
        return "float16"
    return "bfloat16" if devices.cpu_flags & set(BF16_CPU_FLAGS) else "float32"


def auto_jit_compile(devices: Devices) -> bool:
    """Whether ``--jit_compile`` left unset means XLA."""
    return devices.accelerator


def setup_line(
    devices: Devices,
    strategy: tf.distribute.Strategy,
    precision: str,
    jit_compile: bool,
    fused_kernels: bool,
) -> str:
    """The start-up line of a training command: what was found, what was chosen.

    >>> setup_line(Devices(), tf.distribute.get_strategy(), "float32", True, True)
    'devices: CPU only (no GPU or TPU found); strategy _DefaultDistributionStrategy with \
1 replica(s); precision float32; XLA on; layers xla'
    """
    layers = choose_implementation(
        accelerator=devices.accelerator, jit_compile=jit_compile, fused_kernels=fused_kernels
    )
    return (
        f"devices: {devices.describe()}; strategy {type(strategy).__name__} "
        f"with {strategy.num_replicas_in_sync} replica(s); precision {precision}; "
        f"XLA {'on' if jit_compile else 'off'}; "
        f"layers {layers}"
    )


def missing_gpu_warning(devices: Devices, nvidia_present: bool | None = None) -> str | None:
    """A warning when the machine has an NVIDIA GPU that TensorFlow did not find.

    >>> missing_gpu_warning(Devices(), nvidia_present=True)[:40]
    'warning: this machine has an NVIDIA devi'
    >>> missing_gpu_warning(Devices(gpus=((8, 0),)), nvidia_present=True) is None
    True
    """
    if nvidia_present is None:
        nvidia_present = nvidia_device_present()
    if devices.gpus or not nvidia_present:
        return None
    return (
        "warning: this machine has an NVIDIA device but TensorFlow found no GPU, so this "
        "run trains on the CPU. Install TensorFlow's CUDA build "
        "(pip install 'tensorflow[and-cuda]' with our constraints) and check that "
        "nvidia-smi works; --verbosity=0 shows TensorFlow's own reason."
    )
