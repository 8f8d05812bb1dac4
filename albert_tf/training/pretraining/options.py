"""`PretrainingOptions`: everything about a pretraining run but the model's shape.

Every field the ``pretrain`` command exposes has its default here, and the
command reads them from the dataclass fields, so a default changes in one
place.
"""

from __future__ import annotations

import dataclasses

from albert_tf.config import RECOMPUTE_MODES
from albert_tf.data.choices import DATA_SERVICE_MODES
from albert_tf.data.examples import SENTENCE_TASKS
from albert_tf.training.choices import PRECISIONS
from albert_tf.training.pretraining.faults import parse_spec as parse_fault_spec

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
        >>> PretrainingOptions("runs/x", "t", max_seq_length=128,
        ...                    tokens_per_batch=100).validate(1)
        Traceback (most recent call last):
        ...
        ValueError: tokens_per_batch=100 cannot hold one max_seq_length=128 example \
per replica and micro-batch (128 × 1 accumulation steps × 1 replicas); set \
--tokens_per_batch to at least 128.
    """

    model_dir: str
    train_files: str
    eval_files: str | None = None
    max_seq_length: int = 512
    max_predictions_per_seq: int | None = None
    train_batch_size: int = 4096
    #: Token budget of an optimizer step (all replicas and accumulation steps)
    #: instead of train_batch_size: examples are grouped by length and a
    #: batch of shorter ones holds more of them (RoBERTa's batching).
    tokens_per_batch: int | None = None
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
    #: XLA for the model's forward and backward pass; None: on accelerators only
    #: (`albert_tf.training.devices.auto_jit_compile`). Not part of the checkpoint:
    #: a run may resume with it switched.
    jit_compile: bool | None = None
    fused_kernels: bool = True
    #: What the backward pass recomputes instead of keeping
    #: (`albert_tf.layers.encoder.RECOMPUTE_MODES`): ``layer`` keeps only each
    #: transformer layer's input, for about a third more compute.
    recompute: str = "none"
    #: Optimizer steps per call of the compiled loop: the host dispatches one call
    #: and reads two numbers back per loop, not per step. Loops end at every logging,
    #: checkpoint and evaluation step, so those happen exactly as with 1.
    steps_per_loop: int = 1
    save_checkpoints_steps: int = 1000
    #: Also save about this often, in seconds of training (0: steps only): the
    #: seconds become a step interval timed on the first steps after each start,
    #: the same on every worker (`albert_tf.training.pretraining.save_schedule`).
    save_checkpoints_seconds: float = 600.0
    keep_checkpoint_max: int = 5
    eval_every_steps: int = 0
    num_eval_steps: int = 100
    log_every_steps: int = 50
    seed: int = 12345
    progress_bar: bool = True
    #: A tf.data service dispatcher (grpc://host:port) whose workers parse and
    #: mask the training batches; None: this process does.
    data_service: str | None = None
    #: How the service's workers share the data (`DATA_SERVICE_MODES`).
    data_service_mode: str = "parallel_epochs"
    #: Stop after this many optimizer steps in a row skipped for a non-finite
    #: gradient (each skipped step leaves weights and optimizer unchanged).
    max_consecutive_nonfinite_steps: int = 10
    #: Testing hook (`albert_tf.training.pretraining.faults`): faults to inject, e.g.
    #: "nonfinite_at_step:3". The pretrain command reads ALBERT_TF_FAULTS.
    faults: str | None = None

    def validate(self, num_replicas: int) -> None:
        """Raises ValueError for a setting no run could use on ``num_replicas``."""
        if self.sentence_task not in SENTENCE_TASKS:
            raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError("optimizer must be 'lamb' or 'adamw'")
        if self.recompute not in RECOMPUTE_MODES:
            raise ValueError(f"recompute must be one of {RECOMPUTE_MODES}")
        if self.data_service_mode not in DATA_SERVICE_MODES:
            raise ValueError(f"data_service_mode must be one of {DATA_SERVICE_MODES}")
        if self.steps_per_loop < 1:
            raise ValueError("steps_per_loop must be at least 1")
        parse_fault_spec(self.faults)  # a typo in a test's spec fails here, before any work
        if self.steps_per_loop > 1 and self.faults:
            raise ValueError("fault injection needs --steps_per_loop=1 (it acts between steps)")
        if self.save_checkpoints_steps < 1:
            raise ValueError("save_checkpoints_steps must be at least 1")
        if self.save_checkpoints_seconds < 0:
            raise ValueError("save_checkpoints_seconds must be 0 (off) or more")
        if self.max_consecutive_nonfinite_steps < 1:
            raise ValueError("max_consecutive_nonfinite_steps must be at least 1")
        micro = self.gradient_accumulation_steps * num_replicas
        if self.tokens_per_batch is not None:
            # Each replica's micro-batch must hold one example of full length.
            least = self.max_seq_length * micro
            if self.tokens_per_batch < least:
                raise ValueError(
                    f"tokens_per_batch={self.tokens_per_batch} cannot hold one "
                    f"max_seq_length={self.max_seq_length} example per replica and "
                    f"micro-batch ({self.max_seq_length} × {self.gradient_accumulation_steps} "
                    f"accumulation steps × {num_replicas} replicas); set "
                    f"--tokens_per_batch to at least {least}."
                )
        elif self.train_batch_size % micro:
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

    @property
    def micro_batch_tokens(self) -> int | None:
        """Token budget of a micro-batch over all replicas (None: fixed batches)."""
        if self.tokens_per_batch is None:
            return None
        return self.tokens_per_batch // self.gradient_accumulation_steps
