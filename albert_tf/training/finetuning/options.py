"""`FineTuningOptions`: everything about a fine-tuning run, whatever the task.

What every task shares (data files, the start, the schedule, the hardware) is
a field here, with the default the ``finetune`` command's flag shows; what one
task alone reads is its settings object (`albert_tf.tasks.settings`), held in
``settings``. `albert_tf.tasks.run.run_finetuning` runs a run described by one.
Free of TensorFlow: the command reads its defaults before ``--help``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from albert_tf.data.inputs import in_data_dir
from albert_tf.tasks import DEFAULT_TASK, TASKS, get_task
from albert_tf.tasks.settings import TaskSettings, settings_class
from albert_tf.training.choices import PRECISIONS, STRATEGIES

#: The optimizers `FineTuningOptions.optimizer` names.
OPTIMIZERS = ("adamw", "lamb")


def _files(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """One path, or a sequence of them, as a tuple (None stays None)."""
    if value is None:
        return None
    return (value,) if isinstance(value, str) else tuple(value)


@dataclasses.dataclass(frozen=True)
class FineTuningOptions:
    """A fine-tuning run: the task, its settings and what every task shares.

    Example:
        >>> from albert_tf.tasks.span_qa.settings import SpanQASettings
        >>> options = FineTuningOptions("runs/qa", "train.json", task="span_qa",
        ...                             settings=SpanQASettings(doc_stride=64),
        ...                             checkpoint="models/albert_base_v2")
        >>> options.train_files, options.settings.doc_stride
        (('train.json',), 64)
        >>> options.validate()
        >>> FineTuningOptions("runs/mc", "sample:en").settings.max_qa_length  # the defaults
        128
        >>> FineTuningOptions("runs/mc", "sample:en", init_config="c.json",
        ...                   batch_size=6, gradient_accumulation_steps=4).validate()
        Traceback (most recent call last):
        ...
        ValueError: --batch_size=6 must be a multiple of --gradient_accumulation_steps=4
    """

    #: Where ``best/``, ``metrics.jsonl`` and ``summary.json`` go.
    output_dir: str
    #: Training data: files, globs, folders or ``sample:en`` / ``sample:zh``.
    train_files: Sequence[str]
    #: The task's name (`albert_tf.tasks.TASKS`).
    task: str = DEFAULT_TASK
    #: The task's own options, an instance of its settings class (None: its defaults).
    settings: TaskSettings | None = None
    #: Dev data (None: a split of the training items, `split`).
    dev_files: Sequence[str] | None = None
    #: Test data, scored with the best checkpoint at the end.
    test_files: Sequence[str] | None = None
    #: Where relative data paths are found (None: the working directory). Data may
    #: also name a public dataset: ``tfds:NAME[/CONFIG][:SPLIT]`` or a folder that
    #: Hugging Face ``datasets`` wrote (`albert_tf.data.public_datasets`).
    data_dir: str | None = None
    #: train, dev, test fractions of the hash split without `dev_files`.
    split: Sequence[float] = (0.8, 0.1, 0.1)
    split_seed: int = 0
    #: The model directory to start from; or `init_config`, a config JSON for random weights.
    checkpoint: str | None = None
    init_config: str | None = None
    #: The tokenizer (None: ``checkpoint/tokenizer``).
    tokenizer_dir: str | None = None
    #: Also export the best checkpoint as a SavedModel here.
    export_dir: str | None = None
    max_seq_length: int = 512
    #: Items per optimizer step (all replicas, all accumulation steps).
    batch_size: int = 16
    #: Items per dev/test batch (None: twice a micro-batch).
    eval_batch_size: int | None = None
    learning_rate: float = 1e-5
    #: Epochs, unless `num_train_steps` is given.
    num_epochs: float = 3.0
    num_train_steps: int | None = None
    warmup_proportion: float = 0.1
    optimizer: str = "adamw"
    adam_bias_correction: bool = False
    #: Steps between dev evaluations.
    eval_every: int = 500
    #: Evaluations without improvement before stopping; 0 = off.
    patience: int = 5
    #: Random seed (weights of a fresh head, shuffling).
    seed: int = 0
    #: Use at most this many training items (quick runs).
    max_items: int | None = None
    progress: bool = True
    #: Hardware (as ``pretrain``'s flags of the same names): `STRATEGIES`, a TPU's address,
    #: `PRECISIONS`, XLA (None: on accelerators only) and the fused CPU kernels.
    strategy: str = "auto"
    tpu: str | None = None
    precision: str = "auto"
    jit_compile: bool | None = None
    fused_kernels: bool = True
    #: Micro-batches per optimizer step; None ("auto"): the memory plan's on accelerators
    #: (`albert_tf.training.finetuning.memory`), 1 on CPU alone.
    gradient_accumulation_steps: int | None = None
    steps_per_loop: int = 1
    max_consecutive_nonfinite_steps: int = 10

    def __post_init__(self) -> None:
        # One path reads as one file, not as its characters.
        for name in ("train_files", "dev_files", "test_files"):
            object.__setattr__(self, name, _files(getattr(self, name)))
        object.__setattr__(self, "split", tuple(self.split))
        if self.settings is None and self.task in TASKS:
            object.__setattr__(self, "settings", settings_class(TASKS[self.task])())

    def data_paths(self, files: Sequence[str] | None) -> tuple[str, ...] | None:
        """``files`` with relative paths taken from `data_dir` (``sample:`` and
        ``tfds:`` names, absolute paths and bucket URLs as they are: the rule of
        `albert_tf.data.inputs.in_data_dir`, which ``pretrain --data_dir`` follows too).

        >>> FineTuningOptions("o", "x", data_dir="/data").data_paths(
        ...     ["qa/dev.jsonl", "tfds:squad", "sample:en", "/abs/t.json", "gs://b/t.json"])
        ('/data/qa/dev.jsonl', 'tfds:squad', 'sample:en', '/abs/t.json', 'gs://b/t.json')
        """
        return None if files is None else tuple(in_data_dir(f, self.data_dir) for f in files)

    def validate(self, workers: int = 1) -> None:
        """Raises ValueError for options no run can use; ``workers``: the training
        processes ``TF_CONFIG`` lists (`albert_tf.training.devices.cluster_workers`)."""
        spec = get_task(self.task)
        wanted = settings_class(spec)
        if type(self.settings) is not wanted:
            raise ValueError(
                f"task {self.task!r} takes settings={wanted.__name__}(...), "
                f"not {type(self.settings).__name__}"
            )
        self.settings.validate()
        if not self.train_files:
            raise ValueError("give train_files")
        if bool(self.checkpoint) == bool(self.init_config):
            raise ValueError("give exactly one of --checkpoint and --init_config")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.strategy == "multi_worker_mirrored":
            raise ValueError(
                "fine-tuning runs in one process: use --strategy=mirrored (all local GPUs) "
                "or --strategy=tpu; multi_worker_mirrored is for pretraining"
            )
        if self.strategy == "auto" and workers > 1:
            # --strategy=auto would make them one multi-worker job, which fine-tuning
            # is not; each alone would write the same output directory.
            raise ValueError(
                "fine-tuning runs in one process, but TF_CONFIG lists several workers: "
                "launch one fine-tuning process (unset TF_CONFIG), with --strategy=mirrored "
                "for all local GPUs"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        accumulation = self.gradient_accumulation_steps or 1  # None: auto, planned at the start
        if accumulation < 1 or self.steps_per_loop < 1:
            raise ValueError("gradient_accumulation_steps and steps_per_loop must be at least 1")
        if self.batch_size % accumulation:
            raise ValueError(
                f"--batch_size={self.batch_size} must be a multiple of "
                f"--gradient_accumulation_steps={self.gradient_accumulation_steps}"
            )
