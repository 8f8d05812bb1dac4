"""Shared test set-up: quiet TensorFlow, deterministic seeds, tiny configs."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from helpers.testing_utils import BUILDS_ENV, build_lock  # noqa: E402

#: The files that take longest (one to seven minutes each on 2 cores, mostly one module
#: fixture or a chain of subprocesses), handed to the two workers first. Under
#: ``--dist loadfile`` a file runs whole on one worker, and pytest-xdist otherwise hands
#: out files with the most tests first: these few-test files then started last and kept
#: one worker busy minutes after the other had finished (`pytest_configure` turns that
#: reordering off). The first two need no shared model build, so neither worker starts by
#: waiting for the other's.
HEAVY_FIRST = (
    "tests/training/pretraining/test_faults.py",
    "tests/training/test_scale.py",
    "tests/test_cpu_kinds.py",
    "tests/apps/test_multiple_choice_app.py",
    "tests/serving/test_precision.py",
    "tests/tasks/tagging/test_tagging.py",
    "tests/cli/test_pretrain_command.py",
    "tests/serving/test_hostile_batches.py",
    "tests/checkpoints/test_hf_parity.py",
    "tests/apps/test_classification_app.py",
    "tests/apps/test_tagging_app.py",
    "tests/apps/test_question_answering_app.py",
    "tests/apps/test_app.py",
    "tests/tasks/test_predict.py",
)


def pytest_configure(config):
    # pytest-xdist's --no-loadscope-reorder, set here rather than in addopts: a run
    # without pytest-xdist (the TPU install route pins no xdist) would reject the flag.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def shared_builds(tmp_path_factory) -> Path:
    """Where session-wide builds go: ``$ALBERT_TF_TEST_BUILDS`` if set, else the
    folder every pytest-xdist worker of this run shares (``-n 2``), else this
    session's base temp. Build into it under `helpers.testing_utils.build_lock`."""
    if os.environ.get(BUILDS_ENV):
        return Path(os.environ[BUILDS_ENV])
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def mc_models(shared_builds):
    """Tiny English and Chinese multiple-choice models, built once per run
    (tests/training/finetuning, tests/data, tests/serving and tests/apps share them;
    see helpers/mc_helpers.py)."""
    from helpers.mc_helpers import models

    with build_lock(shared_builds, "mc_models"):
        return models(shared_builds)


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
