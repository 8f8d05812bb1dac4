"""`ClassificationSettings`: a classifier's classes, and what picks its best checkpoint."""

from __future__ import annotations

import dataclasses

from albert_tf.tasks.settings import TaskSettings, setting


@dataclasses.dataclass(frozen=True)
class ClassificationSettings(TaskSettings):
    """Classification's options of a fine-tuning run (``finetune`` flags of the same names)."""

    num_labels: int | None = setting(
        None,
        "classification: classes (default: the labels found in --train_files); 1 = regression.",
        lower_bound=1,
    )
    metric: str | None = setting(
        None,
        "classification: dev metric that picks the best checkpoint: accuracy (default), "
        "macro_f1 or mcc; pearson (default) or spearman for regression.",
    )
    distinct_texts: bool = setting(
        False,
        "classification: keep one item of each text (with its pair) of --train_files, the "
        "one of the smallest id, before the split: a set whose reviews repeat word for "
        "word then trains on each once and tests on texts no training read.",
    )
