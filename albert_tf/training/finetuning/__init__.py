"""Fine-tuning: the loop every task shares (`trainer`) and each task's part of it
(`multiple_choice`, `classification`, with `metrics` for classification)."""

from albert_tf.training.finetuning.classification import ClassificationTrainer
from albert_tf.training.finetuning.multiple_choice import MultipleChoiceTrainer
from albert_tf.training.finetuning.trainer import FEATURES, FineTuningTrainer

__all__ = ["FEATURES", "ClassificationTrainer", "FineTuningTrainer", "MultipleChoiceTrainer"]
