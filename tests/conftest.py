"""Shared test set-up: quiet TensorFlow, deterministic seeds, tiny configs."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def mc_models(tmp_path_factory):
    """Tiny English and Chinese multiple-choice models, built once per session
    (tests/finetune, tests/serving and tests/apps share them; see mc_helpers)."""
    from mc_helpers import models

    return models(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True, scope="module")
def _release_memory_after_each_module():
    """What a test module built (Keras models, traced graphs, torch models) is garbage
    once it ends; without this the suite's process grew past 7 GB. malloc_trim gives
    freed heap back to the system, so the next module starts lean."""
    yield
    import contextlib
    import ctypes
    import gc

    import keras

    keras.backend.clear_session()
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@pytest.fixture(autouse=True)
def _seed():
    import keras

    keras.utils.set_random_seed(1234)
    np.random.seed(1234)


# Pretraining shards and a tokenizer prepared once from the embedded sample
# (tests/training and tests/baselines use them).


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    from albert_tf.data.preparation import prepare_pretraining_data

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
