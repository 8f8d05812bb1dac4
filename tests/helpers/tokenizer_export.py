"""A tokenizer alone in a SavedModel, and the fresh-process script that serves it.

``SERVE_TOKENIZE`` loads the SavedModel at ``sys.argv[1]`` with only tensorflow and
tensorflow_text, tokenises the JSON list of texts in ``sys.argv[2]`` and prints the
ids as JSON; it fails if albert_tf was imported.
"""

import tensorflow as tf

SERVE_TOKENIZE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops)
loaded = tf.saved_model.load(sys.argv[1])
ids = loaded.tokenize(tf.constant(json.loads(sys.argv[2])))
print(json.dumps(ids.to_list()))
assert "albert_tf" not in sys.modules
"""


class TokenizeExport(tf.Module):
    """``tokenize(texts: string[batch])`` of a tokenizer, for `tf.saved_model.save`."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, texts):
        return self.tokenizer.tokenize(texts)
