"""Pretraining shards and a tokenizer prepared once from the embedded sample."""

import pytest


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    from albert_tf.training.preparation import prepare_pretraining_data

    return prepare_pretraining_data(
        "sample:en",
        str(tmp_path_factory.mktemp("prepared")),
        vocab_size=800,
        max_seq_length=32,
        dupe_factor=1,
        eval_every=8,
        num_shards=2,
        log=lambda *_: None,
    )


@pytest.fixture(scope="session")
def vocab(prepared):
    from albert_tf.tokenizers import load_tokenizer

    return load_tokenizer(prepared.tokenizer_dir).vocabulary_size
