"""The flags that place a run on hardware, shared by ``pretrain`` and ``finetune``.

Defined once (absl refuses a flag defined twice in a process), with the
defaults of `PretrainingOptions`, so both commands choose devices, strategy,
precision and XLA the same way (`albert_tf.training.devices`).
"""

from __future__ import annotations

import dataclasses

from absl import flags

from albert_tf.training.choices import PRECISIONS, STRATEGIES
from albert_tf.training.pretraining.options import PretrainingOptions

_DEFAULTS = {field.name: field.default for field in dataclasses.fields(PretrainingOptions)}

flags.DEFINE_enum(
    "strategy",
    "auto",
    list(STRATEGIES),
    "tf.distribute strategy. auto: tpu when --tpu is given or a TPU is attached (a TPU "
    "VM), multi_worker_mirrored when TF_CONFIG lists several chief/worker tasks, "
    "mirrored over all local GPUs when there are several, else default (one device). "
    "multi_worker_mirrored needs TF_CONFIG and uses NCCL on GPUs.",
)
flags.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
flags.DEFINE_enum(
    "precision",
    _DEFAULTS["precision"],
    list(PRECISIONS),
    "float32, or mixed precision: bfloat16 or float16 (with loss scaling). auto: "
    "bfloat16 on TPUs, on GPUs of compute capability >= 8.0 (A100, H100, RTX 30xx+) and "
    "on CPUs with bf16 instructions (avx512_bf16, AMX); float16 on older GPUs; else "
    "float32. A resumed pretraining run keeps the precision it started with.",
)
flags.DEFINE_bool(
    "jit_compile",
    _DEFAULTS["jit_compile"],
    "XLA-compile the model's forward and backward pass. Default: on with a GPU or TPU, "
    "off on CPU (the fused kernels are faster there). Pretraining: may change when "
    "resuming. Fine-tuning: batches are padded to multiples of 64 tokens, so few shapes "
    "compile.",
)
flags.DEFINE_bool(
    "fused_kernels",
    _DEFAULTS["fused_kernels"],
    "On CPU, run GELU, LayerNorm, attention's masked softmax and head split/merge as "
    "fused kernels (built with the C++ compiler on first use; stock TensorFlow ops if "
    "that fails). Not with --jit_compile.",
)
flags.DEFINE_string(
    "gradient_accumulation_steps",
    "auto",
    "Micro-batches per optimizer step: the batch size stays the optimizer's, memory "
    "holds one micro-batch. auto: planned from the compiled step's memory on the GPUs "
    "or TPU found (pretrain also takes --assume_devices); 1 on CPU alone.",
)
flags.register_validator(
    "gradient_accumulation_steps",
    lambda v: v == "auto" or (v.isdigit() and int(v) >= 1),
    "--gradient_accumulation_steps must be auto or a whole number of at least 1",
)


def accumulation_steps() -> int | None:
    """``--gradient_accumulation_steps`` as a number; None for ``auto``."""
    value = flags.FLAGS.gradient_accumulation_steps
    return None if value == "auto" else int(value)


flags.DEFINE_integer(
    "steps_per_loop",
    _DEFAULTS["steps_per_loop"],
    "Optimizer steps per compiled call: the host dispatches and reads back once per "
    "loop, which keeps an accelerator busy (try 100 on GPUs/TPUs). Loops stop at every "
    "logging, checkpoint and evaluation step. With --gradient_accumulation_steps "
    "each step's micro-batches are accumulated inside the loop.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "max_consecutive_nonfinite_steps",
    _DEFAULTS["max_consecutive_nonfinite_steps"],
    "Stop with an error after this many steps in a row skipped for a non-finite loss "
    "or gradient (a skipped step leaves weights and optimizer unchanged).",
    lower_bound=1,
)
