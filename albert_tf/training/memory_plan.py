"""A memory plan before step 1: the micro-batch and accumulation steps that fit.

A global batch of 4096 at length 512 does not fit on any one accelerator: each
example keeps hundreds of megabytes of activations for the backward pass. The plan
splits each replica's share of the global batch into ``accumulation_steps``
micro-batches of ``micro_batch`` examples, the largest micro-batch whose compiled
step fits in a device's memory, so that
``micro_batch × accumulation_steps × devices == global batch``.

What a micro-batch needs is not looked up in a table of devices: it is the compiled
step's own memory (`albert_tf.training.compiled_memory`, XLA's buffer assignment),
measured for one and for two examples per replica, which gives a fixed part
(weights, gradients, optimizer slots, per-call scratch) and a part per example
(the activations). The chosen micro-batch is then compiled and measured itself, so
the plan fits by the step's own measure, not by the straight line alone.

Devices are what this process sees, or what ``assume`` names for hardware that is
not present: ``"8x80GB"`` (count × memory per device; ``GB`` is 10⁹ bytes, ``GiB``
2³⁰) or a Cloud TPU name such as ``"v4-8"`` (its chips and their HBM).

>>> parse_devices("8x80GB")
DeviceBudget(count=8, bytes_per_device=80000000000, label='8x80GB')
>>> parse_devices("v4-8")  # 4 chips (8 TensorCores) of 32 GiB
DeviceBudget(count=4, bytes_per_device=34359738368, label='v4-8 (4 chips × 32 GiB HBM)')
>>> budget = DeviceBudget(2, 10_000, "2x10kB")
>>> plan = plan_batches(global_batch=64, budget=budget, measure=lambda m: 2_000 + 600 * m)
>>> plan.micro_batch, plan.accumulation_steps, plan.needed_bytes
(8, 4, 6800)
>>> plan.next_larger  # a micro-batch of 16 would need 11,600 bytes of 9,000 usable
(16, 11600)
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from albert_tf.training.devices import Devices
    from albert_tf.training.steps import TrainingSteps

__all__ = [
    "USABLE_FRACTION",
    "DeviceBudget",
    "MemoryPlan",
    "device_budget",
    "parse_devices",
    "plan_batches",
    "training_step_bytes",
]

#: The share of a device's memory a plan fills: the rest is left to the runtime (CUDA
#: context, cuDNN/cuBLAS workspaces, the input pipeline's prefetch, fragmentation).
USABLE_FRACTION = 0.9

_GIB = 2**30

#: Cloud TPU slice names: version → (TensorCores per device as TensorFlow counts
#: them, HBM per device). v4 and v5p are "megacore" chips (a name counts
#: TensorCores, TensorFlow one device per chip); v2, v3, v5e and v6e one per core/chip.
_TPUS = {
    "v2": (1, 8 * _GIB),
    "v3": (1, 16 * _GIB),
    "v4": (2, 32 * _GIB),
    "v5p": (2, 95 * _GIB),
    "v5e": (1, 16 * _GIB),
    "v5litepod": (1, 16 * _GIB),
    "v6e": (1, 32 * _GIB),
}
_UNITS = {"gb": 10**9, "gib": _GIB, "mb": 10**6, "mib": 2**20, "kb": 10**3}


@dataclasses.dataclass(frozen=True)
class DeviceBudget:
    """How many devices a run has and the memory of each."""

    count: int
    bytes_per_device: int
    label: str

    @property
    def usable_bytes(self) -> int:
        return int(self.bytes_per_device * USABLE_FRACTION)


def parse_devices(text: str) -> DeviceBudget:
    """``"COUNTxMEMORY"`` (``8x80GB``, ``8x40GiB``) or a TPU slice name (``v4-8``,
    ``v3-32``, ``v5e-8``): the devices ``--assume_devices`` plans for."""
    spec = text.strip()
    match = re.fullmatch(r"(\d+)\s*[x×]\s*(\d+(?:\.\d+)?)\s*([kKmMgG]i?[bB])", spec)
    if match:
        count, size, unit = int(match[1]), float(match[2]), match[3].lower()
        if count < 1 or size <= 0:
            raise ValueError(f"--assume_devices={text!r}: count and memory must be positive")
        return DeviceBudget(count, int(size * _UNITS[unit]), spec)
    match = re.fullmatch(r"(v\d+[a-z]*)-(\d+)", spec.lower())
    if match and match[1] in _TPUS:
        cores_per_device, hbm = _TPUS[match[1]]
        cores = int(match[2])
        count = max(1, cores // cores_per_device)
        unit = "chips" if cores_per_device > 1 else "devices"
        label = f"{spec} ({count} {unit} × {hbm // _GIB} GiB HBM)"
        return DeviceBudget(count, hbm, label)
    raise ValueError(
        f"--assume_devices={text!r} is not COUNTxMEMORY (e.g. 8x80GB, 8x40GiB) or a TPU "
        f"slice name ({', '.join(f'{v}-8' for v in _TPUS)})"
    )


def device_budget(
    devices: Devices,
    replicas: int | None = None,
    *,
    gpu_memory: list[int] | None = None,
    tpu_type: str | None = None,
) -> DeviceBudget | None:
    """The budget of the accelerators found: GPUs by ``nvidia-smi``'s total memory
    (the smallest card decides), a TPU by its slice type (``TPU_ACCELERATOR_TYPE``,
    set on Cloud TPU VMs). None on CPU alone, or when the memory cannot be read
    (the caller then keeps one accumulation step and says so).

    >>> from albert_tf.training.devices import Devices
    >>> device_budget(Devices(gpus=((8, 0),) * 8), gpu_memory=[40 * 2**30] * 8).label
    '8 GPU(s) × 42.9 GB'
    >>> device_budget(Devices(tpu=True), 4, tpu_type="v4-8").count
    4
    >>> device_budget(Devices()) is None
    True
    """
    if devices.tpu:
        name = tpu_type or os.environ.get("TPU_ACCELERATOR_TYPE")
        if not name:
            return None
        budget = parse_devices(name)
        return dataclasses.replace(budget, count=replicas or budget.count)
    if devices.gpus:
        memory = gpu_memory if gpu_memory is not None else _nvidia_memory()
        if not memory:
            return None
        count = replicas or len(devices.gpus)
        smallest = min(memory)
        return DeviceBudget(count, smallest, f"{len(memory)} GPU(s) × {smallest / 1e9:.1f} GB")
    return None


def _nvidia_memory() -> list[int]:
    """Each GPU's total memory in bytes, by ``nvidia-smi``; [] if it cannot say."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return [int(float(line)) * 2**20 for line in out.split() if line.strip()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """What each optimizer step runs on each device, and why it fits."""

    global_batch: int
    budget: DeviceBudget
    #: Examples per replica in one forward/backward pass.
    micro_batch: int
    accumulation_steps: int
    #: The compiled step's bytes at ``micro_batch`` (plus what lives outside it).
    needed_bytes: int
    #: ``(bytes, bytes per example)`` of the straight line through the probes.
    fixed_bytes: int
    per_example_bytes: int
    #: The next micro-batch that would divide the batch, and its bytes (None: none larger).
    next_larger: tuple[int, int] | None
    #: Where the step was compiled and measured (``"XLA:CPU"``, ``"XLA:GPU"``).
    measured_on: str = "XLA:CPU"
    #: The compute precision planned for.
    precision: str = "float32"

    def describe(self) -> str:
        """One line for the start-up output."""
        per_replica = self.micro_batch * self.accumulation_steps
        line = (
            f"memory plan: {self.budget.count} device(s) × {_gb(self.budget.bytes_per_device)} "
            f"({self.budget.label}); {per_replica} example(s) per device and step = "
            f"micro-batch {self.micro_batch} × {self.accumulation_steps} accumulation step(s); "
            f"needs {_gb(self.needed_bytes)} of {_gb(self.budget.usable_bytes)} usable "
            f"({_gb(self.per_example_bytes)} per example + {_gb(self.fixed_bytes)}, "
            f"measured on {self.measured_on})"
        )
        if self.next_larger:
            m, need = self.next_larger
            line += f"; a micro-batch of {m} would need {_gb(need)}"
        return line


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 10**7 else f"{n:,} bytes"


def plan_batches(
    *, global_batch: int, budget: DeviceBudget, measure: Callable[[int], int]
) -> MemoryPlan:
    """The largest micro-batch per device whose step fits, and the accumulation it implies.

    Args:
        global_batch: examples per optimizer step over all devices.
        budget: the devices.
        measure: bytes one device needs for a step on ``m`` examples (the compiled
            step's total plus any state outside it). Called for 1 and 2, then for the
            chosen size (and smaller ones, should the line have been optimistic).
    """
    if global_batch % budget.count:
        raise ValueError(
            f"the global batch of {global_batch} does not divide over {budget.count} "
            f"devices; choose a multiple of {budget.count}."
        )
    per_device = global_batch // budget.count
    usable = budget.usable_bytes
    one = measure(1)
    if one > usable:
        raise ValueError(
            f"nothing fits: one example per device needs {_gb(one)} but "
            f"{budget.label} leaves {_gb(usable)} usable per device "
            f"({USABLE_FRACTION:.0%} of {_gb(budget.bytes_per_device)}). Shorten "
            "--max_seq_length, use --recompute=layer or a lower --precision, or plan for "
            "devices with more memory."
        )
    two = measure(2) if per_device > 1 else 2 * one
    per_example = max(two - one, 0)
    fixed = one - per_example

    def line(m: int) -> int:
        return fixed + per_example * m

    sizes = [m for m in range(1, per_device + 1) if per_device % m == 0]
    fitting = [m for m in sizes if line(m) <= usable] or [1]
    index = sizes.index(fitting[-1])
    while True:  # confirm by the step's own measure; step down if the line was optimistic
        micro = sizes[index]
        needed = {1: one, 2: two}.get(micro) or measure(micro)
        if needed <= usable or index == 0:
            break
        index -= 1
    larger = sizes[index + 1] if index + 1 < len(sizes) else None
    return MemoryPlan(
        global_batch=global_batch,
        budget=budget,
        micro_batch=micro,
        accumulation_steps=per_device // micro,
        needed_bytes=needed,
        fixed_bytes=fixed,
        per_example_bytes=per_example,
        next_larger=(larger, line(larger)) if larger else None,
    )


def training_step_bytes(
    steps: TrainingSteps, features, labels, *, accumulating: bool, platform: str = "CPU"
) -> int:
    """Bytes one device needs for an optimizer step of ``steps`` on one replica's
    micro-batch of the specs ``features`` and ``labels`` (`tf.TensorSpec` s, fully
    defined): the compiled forward and backward pass (`steps._gradients` through
    `albert_tf.training.compiled_memory`: weights, batch, gradients, activations,
    scratch), plus what lives outside that program: the optimizer's slots and, when
    ``accumulating``, the gradient accumulators (a float32 copy of the trained weights).
    """
    import tensorflow as tf

    from albert_tf.training.compiled_memory import compiled_memory

    # The step's normalisers have the shape of what `local_counts` counts.
    counts = tf.function(steps.local_counts, autograph=False).get_concrete_function(labels)
    normalizers = tf.TensorSpec(counts.structured_outputs.shape, tf.float32)
    memory = compiled_memory(steps._gradients, features, labels, normalizers, platform=platform)
    optimizer = steps.optimizer
    slots = sum(_nbytes(v) for v in optimizer.variables if v is not optimizer.iterations)
    accumulators = sum(4 * int(v.shape.num_elements()) for v in steps.variables)
    return memory.total_bytes + slots + (accumulators if accumulating else 0)


def _nbytes(variable) -> int:
    import tensorflow as tf

    return int(variable.shape.num_elements()) * tf.as_dtype(variable.dtype).size
