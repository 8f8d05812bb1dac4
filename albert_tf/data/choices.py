"""The values the data options take, free of TensorFlow: the commands list them in
``--help`` before TensorFlow is imported."""

#: How tf.data service workers share the shards (`albert_tf.data.pipeline`).
DATA_SERVICE_MODES = ("parallel_epochs", "distributed_epoch")
