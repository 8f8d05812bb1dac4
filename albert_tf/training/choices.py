"""The values the training options take, free of TensorFlow: the commands list them
in ``--help`` before TensorFlow is imported."""

#: ``--precision`` (`albert_tf.training.precision` resolves "auto").
PRECISIONS = ("auto", "float32", "bfloat16", "float16")

#: ``--strategy`` (`albert_tf.training.strategies` builds them).
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
