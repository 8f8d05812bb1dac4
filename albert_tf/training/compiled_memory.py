"""How much memory XLA plans for a compiled function, read from its buffer assignment.

Why: the bytes a training step needs (activations kept for the backward, the
temporaries of attention, optimizer state) decide the batch size that fits. Timing a
run and reading a process's resident size mixes in TensorFlow's allocator caches,
other threads and whatever ran before; XLA's *buffer assignment* states the plan
itself. ``tf.function(..., jit_compile=True).experimental_get_compiler_ir(...)``
with ``stage="optimized_hlo_proto_serialized"`` returns an ``xla.HloProto`` whose
``buffer_assignment`` lists every allocation of the compiled program with its size
and kind (parameter, output, constant, thread-local, preallocated temporary); the
proto class ships with TensorFlow (``tensorflow.compiler.xla.service.hlo_pb2``). The
same numbers are what ``XLA_FLAGS=--xla_dump_to=DIR`` writes to
``*buffer-assignment.txt`` (``Total bytes used``), without a subprocess or files.

The arguments may be ``tf.TensorSpec`` s: nothing of that size is allocated, only
compiled (a step for a batch that would not fit in RAM can still be measured).

Limits:

* The numbers are for the backend compiled for (``platform``, default ``"CPU"``):
  XLA:CPU's fusion, layouts and scheduling; GPU and TPU plan differently (other
  fusions, rematerialisation on TPU), so a CPU figure is a guide for them, not a
  measurement.
* Only XLA's own buffers. Scratch a library call allocates inside an op (oneDNN,
  Eigen, XNNPACK matmuls) and TensorFlow's memory outside the compiled cluster
  (the input pipeline, variables' other copies, eager tensors) are not in it.
* ``fn`` must compile whole under ``jit_compile=True`` (no ops XLA lacks) and must
  not create variables: build the model and the optimizer (``optimizer.build``)
  before. Variables it reads are parameters of the program (``argument_bytes``).
* Under ``tf.distribute`` measure one replica's function (its per-replica shapes),
  outside ``strategy.run``.
* Each call compiles (a full XLA compile: a second or so for a small model, tens of
  seconds for a large one); nothing is cached.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["CompiledMemory", "compiled_memory"]


@dataclasses.dataclass(frozen=True)
class CompiledMemory:
    """Bytes of one XLA-compiled program, from its buffer assignment.

    Example:
        >>> import tensorflow as tf
        >>> def scores(q, k):  # one [512, 512] float32 temporary: 1 MiB
        ...     return tf.reduce_sum(tf.exp(tf.matmul(q, k, transpose_b=True)), axis=1)
        >>> spec = tf.TensorSpec([512, 64], tf.float32)
        >>> memory = compiled_memory(scores, spec, spec)
        >>> memory.temp_bytes, memory.argument_bytes, memory.output_bytes
        (1048576, 262144, 2048)
    """

    #: Preallocated temporaries: the scratch the program allocates for one call, as
    #: XLA's heap simulator packed it (buffers whose lifetimes do not overlap share
    #: bytes, so this is the peak of live intermediates in the compiled order, plus
    #: any fragmentation). What grows with the activations of a training step.
    temp_bytes: int
    #: Entry parameters: the arguments and the variables the function reads.
    argument_bytes: int
    #: Buffers that may be live out: the results (and the output tuple's pointers).
    output_bytes: int
    #: Outputs written in place of a parameter (counted in both above).
    alias_bytes: int
    #: Constants baked into the program.
    constant_bytes: int
    #: The largest temporaries (HLO instruction name, bytes), largest first: which
    #: intermediates the temp arena holds.
    largest_temporaries: tuple[tuple[str, int], ...]
    #: The XLA platform compiled for (``"CPU"``, ``"GPU"``, ``"TPU"``).
    platform: str

    @property
    def total_bytes(self) -> int:
        """What the program holds at its peak: arguments, outputs not aliasing an
        argument, temporaries and constants."""
        return (
            self.argument_bytes
            + self.output_bytes
            - self.alias_bytes
            + self.temp_bytes
            + self.constant_bytes
        )

    @property
    def largest_temporary_bytes(self) -> int:
        """The size of the one largest temporary (0 if none)."""
        return self.largest_temporaries[0][1] if self.largest_temporaries else 0


def compiled_memory(
    fn: Callable[..., Any], *args: Any, platform: str = "CPU", top: int = 5, **kwargs: Any
) -> CompiledMemory:
    """Compiles ``fn(*args, **kwargs)`` with XLA for ``platform`` and returns its
    memory plan (see `CompiledMemory`).

    Args:
        fn: a Python function or a ``tf.function`` (compiled with ``jit_compile=True``
            whatever it was declared with).
        *args, **kwargs: nested structures whose tensors, arrays and
            ``tf.TensorSpec`` s (fully defined shapes) become the program's
            parameters; any other leaf (a Python number, a flag, a variable) is
            fixed at trace time.
        platform: the XLA backend to compile for.
        top: how many of the largest temporaries to name.
    """
    import numpy as np
    import tensorflow as tf
    from tensorflow.compiler.xla.service import hlo_pb2

    structure = (args, kwargs)
    leaves = tf.nest.flatten(structure, expand_composites=False)
    specs, positions = [], []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, tf.TensorSpec):
            spec = leaf
        elif isinstance(leaf, (tf.Tensor, np.ndarray)) and not isinstance(leaf, tf.Variable):
            spec = tf.TensorSpec(leaf.shape, tf.as_dtype(leaf.dtype))
        else:
            continue
        if not spec.shape.is_fully_defined():
            raise ValueError(f"compiled_memory needs static shapes; argument {i} is {spec}")
        specs.append(spec)
        positions.append(i)

    def flat_fn(*tensors):
        filled = list(leaves)
        for i, tensor in zip(positions, tensors, strict=True):
            filled[i] = tensor
        call_args, call_kwargs = tf.nest.pack_sequence_as(structure, filled)
        return fn(*call_args, **call_kwargs)

    compiled = tf.function(flat_fn, jit_compile=True, autograph=False)
    ir = compiled.experimental_get_compiler_ir(*specs)
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(ir(stage="optimized_hlo_proto_serialized", platform_name=platform))
    return _from_proto(proto, platform, top)


def _from_proto(proto: Any, platform: str, top: int) -> CompiledMemory:
    """The sums over ``proto.buffer_assignment``'s allocations, as XLA's own
    ``CompiledMemoryStats`` counts them (thread-local and tuple-pointer buffers are
    stack allocations, not temporaries)."""
    names = {
        instruction.id: instruction.name
        for computation in proto.hlo_module.computations
        for instruction in computation.instructions
    }
    defined_at = {
        buffer.id: names.get(buffer.defined_at.instruction_id, "?")
        for buffer in proto.buffer_assignment.logical_buffers
    }
    sums: collections.Counter[str] = collections.Counter()
    temporaries: dict[str, int] = {}
    for allocation in proto.buffer_assignment.buffer_allocations:
        size = allocation.size
        if allocation.is_entry_computation_parameter:
            sums["argument"] += size
            if allocation.maybe_live_out:
                sums["alias"] += size
        if allocation.maybe_live_out:
            sums["output"] += size
        if allocation.is_constant:
            sums["constant"] += size
        temp = not (
            allocation.is_entry_computation_parameter
            or allocation.maybe_live_out
            or allocation.is_constant
            or allocation.is_thread_local
            or allocation.is_tuple
        )
        if temp:
            sums["temp"] += size
            for assigned in allocation.assigned:
                name = defined_at.get(assigned.logical_buffer_id, "?")
                temporaries[name] = max(temporaries.get(name, 0), assigned.size)
    largest = sorted(temporaries.items(), key=lambda item: (-item[1], item[0]))[:top]
    return CompiledMemory(
        temp_bytes=sums["temp"],
        argument_bytes=sums["argument"],
        output_bytes=sums["output"],
        alias_bytes=sums["alias"],
        constant_bytes=sums["constant"],
        largest_temporaries=tuple(largest),
        platform=platform,
    )
