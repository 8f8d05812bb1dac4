"""What a tiny fine-tuning run starts from, and public-dataset rows in TFDS's own layout.

* `tiny_start`: the English tokenizer of the sample corpus and a tiny two-layer config
  for it, as ``FineTuningOptions`` takes them (``init_config``, ``tokenizer_dir``).
* `tfds_rows`: an ``as_dataset_fn`` for `tfds.testing.mock_data` that yields rows
  written by the test in the dataset's own feature layout (TFDS's random mock text has
  answers that are not in their contexts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from helpers.mc_helpers import train_tokenizer
from helpers.testing_utils import TWO_LAYERS, tiny_config


def tiny_start(root: Path, **config) -> dict[str, str]:
    """A tokenizer and a tiny config under ``root``; ``config`` overrides its fields."""
    from albert_tf.tokenizers import load_tokenizer

    train_tokenizer("en", root / "tokenizer")
    vocab = load_tokenizer(root / "tokenizer").vocabulary_size
    tiny_config(vocab_size=vocab, **(TWO_LAYERS | config)).to_hf_json(root / "config.json")
    return {"init_config": str(root / "config.json"), "tokenizer_dir": str(root / "tokenizer")}


def tfds_rows(rows: Callable[[str], Iterable[dict]]):
    """``as_dataset_fn`` serving ``rows(split)`` (the split's name, e.g. ``"train"``)."""
    import tensorflow as tf

    def as_dataset(builder, split, **_):
        spec = builder.info.features.get_tensor_spec()
        return tf.data.Dataset.from_generator(lambda: iter(rows(str(split))), output_signature=spec)

    return as_dataset
