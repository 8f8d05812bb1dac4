"""What a user of the encoder/preprocessor pair writes, with TensorFlow, tensorflow-text
and Keras only (no albert_tf): a classifier on the two SavedModels, fine-tuned a few steps.

usage: encoder_user.py EXPORT_DIR OUT.npz

tensorflow-hub's ``hub.KerasLayer`` does not work with Keras 3, so the encoder is
wrapped in a small layer that hands Keras the SavedModel's own variables.
"""

import sys

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the preprocessor's ops)

export_dir, out = sys.argv[1:3]
assert "albert_tf" not in sys.modules


class SavedModelEncoder(keras.layers.Layer):
    """A TF Hub style encoder as a Keras layer, its variables trained in place."""

    def __init__(self, path: str, **kwargs):
        super().__init__(**kwargs)
        self.encoder = tf.saved_model.load(path)
        trainable = {id(v) for v in self.encoder.trainable_variables}
        # keras.Variable wraps an existing tf.Variable without copying it.
        self.wrapped = [
            keras.Variable(v, trainable=id(v) in trainable, name=f"v{i}")
            for i, v in enumerate(self.encoder.variables)
        ]

    def call(self, inputs, training=False):
        return self.encoder(inputs, training=bool(training))


preprocessor = tf.saved_model.load(f"{export_dir}/preprocessor")
encoder_layer = SavedModelEncoder(f"{export_dir}/encoder")
special = {k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()}

texts = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "the sun is hot today",
    "we went to the sea",
    "birds sing in the morning",
    "rain fell all night long",
    "she reads a long book",
    "he plays the old piano",
]
labels = np.array([1, 0, 1, 0, 0, 0, 0, 1], "int32")  # whether "the" appears
packed = preprocessor(tf.constant(texts))
pair = preprocessor.bert_pack_inputs(
    [preprocessor.tokenize(tf.constant(texts[:2])), preprocessor.tokenize(tf.constant(texts[2:4]))],
    seq_length=tf.constant(12),
)
outputs = encoder_layer(packed)
# `training` reaches the encoder: dropout on, then off again.
again = encoder_layer.encoder(packed, training=False)["pooled_output"].numpy()
dropped = encoder_layer.encoder(packed, training=True)["pooled_output"].numpy()
mlm = encoder_layer.encoder.mlm(
    {**packed, "masked_lm_positions": tf.constant([[1, 2]] * len(texts))}, training=False
)

inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in packed}
pooled = encoder_layer(inputs)["pooled_output"]
logits = keras.layers.Dense(2, name="classifier")(pooled)
classifier = keras.Model(inputs, logits)
classifier.compile(
    optimizer=keras.optimizers.Adam(3e-3),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
features = {k: v.numpy() for k, v in packed.items()}
before = classifier.evaluate(features, labels, verbose=0)
weights_before = [v.numpy().copy() for v in encoder_layer.encoder.trainable_variables]
classifier.fit(features, labels, epochs=30, batch_size=8, verbose=0)
after = classifier.evaluate(features, labels, verbose=0)
moved = max(
    float(np.abs(v.numpy() - w).max())
    for v, w in zip(encoder_layer.encoder.trainable_variables, weights_before, strict=True)
)
np.savez(
    out,
    **{f"packed_{k}": v.numpy() for k, v in packed.items()},
    **{f"pair_{k}": v.numpy() for k, v in pair.items()},
    pooled=outputs["pooled_output"].numpy(),
    sequence=outputs["sequence_output"].numpy(),
    layers=np.stack([t.numpy() for t in outputs["encoder_outputs"]]),
    default=outputs["default"].numpy(),
    inference_again=again,
    training_output=dropped,
    mlm_logits=mlm["mlm_logits"].numpy(),
    special=np.array([special[k] for k in sorted(special)]),
    special_names=np.array(sorted(special)),
    texts=np.array(texts),
    loss_before=before,
    loss_after=after,
    encoder_weights_moved=moved,
    trainable_in_classifier=len(classifier.trainable_weights),
    trainable_in_encoder=len(encoder_layer.encoder.trainable_variables),
)
