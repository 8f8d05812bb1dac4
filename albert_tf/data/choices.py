"""The values the data options take, free of TensorFlow: the commands list them in
``--help`` before TensorFlow is imported."""

#: How tf.data service workers share the shards (`albert_tf.data.pipeline`).
DATA_SERVICE_MODES = ("parallel_epochs", "distributed_epoch")

#: Which end of an over-long multiple-choice context is kept
#: (`albert_tf.tasks.multiple_choice.data`).
CONTEXT_KEEP = ("start", "end")
