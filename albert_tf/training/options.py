"""`PretrainingOptions`: everything about a pretraining run but the model's shape.

Every field the ``pretrain`` command exposes has its default here, and the
command reads them from the dataclass fields, so a default changes in one
place.
"""

from __future__ import annotations

import dataclasses

from albert_tf.data.examples import SENTENCE_TASKS
from albert_tf.training.precision import PRECISIONS

#: The optimizers `PretrainingOptions.optimizer` names.
OPTIMIZERS = ("lamb", "adamw")


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """Everything about a pretraining run except the model's shape.

    Example:
        >>> options = PretrainingOptions("runs/x", "data/train-*.tfrecord",
        ...                              train_batch_size=64, gradient_accumulation_steps=4)
        >>> options.micro_batch_size
        16
        >>> options.validate(num_replicas=2)
        >>> PretrainingOptions("runs/x", "t", sentence_task="mlm").validate(1)
        Traceback (most recent call last):
        ...
        ValueError: sentence_task must be one of ('sop', 'nsp', 'none')
    """

    model_dir: str
    train_files: str
    eval_files: str | None = None
    max_seq_length: int = 512
    max_predictions_per_seq: int | None = None
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    num_train_steps: int = 125_000
    num_warmup_steps: int = 3125
    learning_rate: float = 0.00176
    optimizer: str = "lamb"
    weight_decay_rate: float = 0.01
    clip_norm: float = 1.0
    gradient_accumulation_steps: int = 1
    sentence_task: str = "sop"
    precision: str = "auto"
    jit_compile: bool = False
    fused_kernels: bool = True
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    eval_every_steps: int = 0
    num_eval_steps: int = 100
    log_every_steps: int = 50
    seed: int = 12345
    progress_bar: bool = True

    def validate(self, num_replicas: int) -> None:
        """Raises ValueError for a setting no run could use on ``num_replicas``."""
        if self.sentence_task not in SENTENCE_TASKS:
            raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError("optimizer must be 'lamb' or 'adamw'")
        micro = self.gradient_accumulation_steps * num_replicas
        if self.train_batch_size % micro:
            raise ValueError(
                f"train_batch_size={self.train_batch_size} is not divisible by "
                f"gradient_accumulation_steps × replicas = "
                f"{self.gradient_accumulation_steps} × {num_replicas}; choose a "
                f"multiple of {micro}."
            )
        if self.eval_files and self.eval_batch_size % num_replicas:
            raise ValueError(
                f"eval_batch_size={self.eval_batch_size} is not divisible by "
                f"{num_replicas} replicas."
            )

    @property
    def micro_batch_size(self) -> int:
        """Examples per micro-batch (one forward/backward pass) over all replicas."""
        return self.train_batch_size // self.gradient_accumulation_steps
