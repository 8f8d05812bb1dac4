"""Quick-start demo: ``python -m albert_tf.demo``.

Trains a small SentencePiece tokenizer on the embedded English sample,
builds ALBERT-base (paper shape, random weights), prints where its
parameters are, and runs one forward pass on real sentences from the sample.
Nothing is downloaded. Pretraining a real model is ``python -m
albert_tf.pretrain`` (docs/pretraining.md).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time

from absl import flags

from albert_tf.cli import runner

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "albert_base_v2", "Model shape to build.")
flags.DEFINE_integer("vocab_size", 2000, "Pieces of the demo tokenizer.")
flags.DEFINE_integer("max_seq_length", 64, "Sequence length of the demo batch.")
flags.DEFINE_string("output_dir", None, "Where to keep the tokenizer (default: a temp dir).")


def main() -> None:
    import numpy as np
    import tensorflow as tf

    from albert_tf.data import read_documents, sample_path
    from albert_tf.model_size import parameter_count
    from albert_tf.models.pretraining_model import AlbertPretrainingModel
    from albert_tf.presets import get_preset
    from albert_tf.tokenizers import train_sentencepiece

    documents = list(read_documents(sample_path("en")))
    sentences = [s for doc in documents for s in doc]
    output_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="albert_demo_")
    print(
        f"training a {FLAGS.vocab_size}-piece SentencePiece tokenizer on "
        f"{len(sentences)} sample sentences -> {output_dir}"
    )
    tokenizer = train_sentencepiece(
        sentences, os.path.join(output_dir, "tokenizer"), vocab_size=FLAGS.vocab_size
    )

    config = get_preset(FLAGS.preset)
    count = parameter_count(config)
    print(
        f"\n{FLAGS.preset}: E={config.embedding_size} H={config.hidden_size} "
        f"L={config.num_hidden_layers} share={config.share}"
    )
    for part in ("embedding", "projection", "attention", "feedforward", "pooler"):
        print(f"  {part:<12} {getattr(count, part):>12,}")
    print(f"  {'total':<12} {count.total:>12,}")

    model = AlbertPretrainingModel.from_albert_config(config)
    first, second = sentences[0], sentences[1]
    a, b = tokenizer.tokenize(tf.constant([first, second])).to_list()
    budget = FLAGS.max_seq_length - 3
    a, b = a[: budget // 2], b[: budget - budget // 2]
    ids = [tokenizer.cls_id, *a, tokenizer.sep_id, *b, tokenizer.sep_id]
    segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    batch = {
        "token_ids": np.array([ids], "int32"),
        "segment_ids": np.array([segments], "int32"),
        "padding_mask": np.ones((1, len(ids)), "int32"),
    }
    forward = tf.function(lambda inputs: model(inputs, training=False))
    forward(batch)  # trace once; the timed call runs the compiled graph
    start = time.perf_counter()
    out = forward(batch)
    elapsed = time.perf_counter() - start
    pieces = tokenizer.id_to_token(tf.constant(ids)).numpy()
    print(
        f"\ninput ({len(ids)} pieces): "
        + " ".join(p.decode() for p in itertools.islice(pieces, 24))
        + " ..."
    )
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        print(f"  {key:<16} {tuple(out[key].shape)}")
    print(
        f"forward pass: {elapsed * 1000:.1f} ms on CPU "
        "(random weights: predictions are meaningless until pretraining)"
    )


def run() -> None:
    """The `albert-demo` console script."""
    runner.run(main, "demo")


if __name__ == "__main__":
    run()
