"""A tokenizer alone in a SavedModel, and the fresh-process script that serves it.

``SERVE_TOKENIZE`` loads the SavedModel at ``sys.argv[1]`` with only tensorflow and
tensorflow_text, tokenises the JSON list of texts in ``sys.argv[2]`` and prints the
ids as JSON (with a third argument, ``tokenize_with_offsets``'s ids, starts and ends);
it fails if albert_tf was imported.
"""

import tensorflow as tf

SERVE_TOKENIZE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops)
loaded = tf.saved_model.load(sys.argv[1])
texts = tf.constant(json.loads(sys.argv[2]))
if len(sys.argv) > 3:  # "offsets": ids, starts and ends
    print(json.dumps([t.to_list() for t in loaded.tokenize_with_offsets(texts)]))
else:
    print(json.dumps(loaded.tokenize(texts).to_list()))
assert "albert_tf" not in sys.modules
"""


class TokenizeExport(tf.Module):
    """``tokenize(texts: string[batch])`` and ``tokenize_with_offsets`` of a tokenizer
    (with offsets), for `tf.saved_model.save`."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer
        if tokenizer.has_offsets:
            self.tokenize_with_offsets = tf.function(
                tokenizer.tokenize_with_offsets,
                input_signature=[tf.TensorSpec([None], tf.string)],
            )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, texts):
        return self.tokenizer.tokenize(texts)
