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


@pytest.fixture(autouse=True)
def _seed():
    import keras

    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
