"""The compiled steps of pretraining: MLM + sentence-order sums on the shared machinery.

How a global batch is split over replicas, losses normalised, gradients
reduced, clipped, accumulated and non-finite steps skipped is
`albert_tf.training.steps.TrainingSteps`, shared with fine-tuning; this module
says what pretraining sums: masked-LM loss, accuracy and count, and the same
for the sentence task.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.training.losses import masked_lm_sums, sentence_order_sums
from albert_tf.training.pretraining.options import PretrainingOptions
from albert_tf.training.steps import COMMON_SUMS, TrainingSteps
from albert_tf.training.strategies import num_workers


def variables_to_train(model: AlbertPretrainingModel, sentence_task: str) -> list:
    """The model's trainable variables that the loss reaches.

    Without a sentence task no gradient flows to the pooler or the SOP
    head: they keep their initial values (the paper's "None" model) rather
    than being decayed towards zero by the optimizer's weight decay.
    """
    variables = model.trainable_variables
    if sentence_task != "none":
        return variables
    unused = {
        id(v)
        for v in (
            *model.sop_head.trainable_variables,
            *model.backbone.pooler.trainable_variables,
        )
    }
    return [v for v in variables if id(v) not in unused]


#: The objective's sums (masked LM, then the sentence task).
OBJECTIVE_SUMS = (
    "mlm_loss_sum",
    "mlm_correct",
    "mlm_count",
    "sop_loss_sum",
    "sop_correct",
    "sop_count",
)
#: What a training step sums (and the compiled loop adds up over its steps).
STEP_SUMS = (*OBJECTIVE_SUMS, *COMMON_SUMS)


class PretrainingSteps(TrainingSteps):
    """The `tf.function` steps of one pretraining run under ``strategy``.

    Create it inside ``strategy.scope()``. The loss is the mean MLM loss over
    the global micro-batch's masked tokens, plus the mean sentence-task loss
    over its examples (unless ``sentence_task`` is ``"none"``).
    """

    sum_names = OBJECTIVE_SUMS

    def __init__(
        self,
        model: AlbertPretrainingModel,
        optimizer: keras.optimizers.Optimizer,
        strategy: tf.distribute.Strategy,
        options: PretrainingOptions,
    ):
        self.options = options
        super().__init__(
            model,
            optimizer,
            strategy,
            variables=variables_to_train(model, options.sentence_task),
            clip_norm=options.clip_norm,
            gradient_accumulation_steps=options.gradient_accumulation_steps,
            jit_compile=bool(options.jit_compile),
            max_consecutive_nonfinite_steps=options.max_consecutive_nonfinite_steps,
            input_per_worker=num_workers(strategy) > 1 and not options.data_service,
        )

    def forward_sums(self, features, labels, training: bool):
        outputs = self.model(features, training=training)
        sums = masked_lm_sums(outputs["mlm_logits"], labels["mask_ids"], labels["mask_weights"])
        sums.update(sentence_order_sums(outputs["sop_logits"], labels["sentence_order_label"]))
        return sums

    def local_counts(self, labels):
        """[masked tokens, examples] of a micro-batch."""
        return tf.stack(
            [
                tf.reduce_sum(tf.cast(labels["mask_weights"], tf.float32)),
                tf.cast(tf.size(labels["sentence_order_label"]), tf.float32),
            ]
        )

    def loss(self, sums, normalizers):
        loss = sums["mlm_loss_sum"] / normalizers[0]
        if self.options.sentence_task != "none":
            loss += sums["sop_loss_sum"] / normalizers[1]
        return loss
