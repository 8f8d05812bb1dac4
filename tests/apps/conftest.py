"""The app tests run Streamlit's AppTest, which leaves the app as ``__main__``;
the classification page's tests share tiny classifiers built once per session."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def _restore_main_module():
    """Streamlit's AppTest runs the app as ``__main__`` and leaves it in
    sys.modules; a later test that spawns processes would then make every
    child re-run the app script."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture(autouse=True, scope="module")
def _release_loaded_models():
    """The pages keep their SavedModels in Streamlit's process-wide resource cache;
    after a module nothing needs them, and each holds hundreds of MB."""
    yield
    import gc

    import streamlit as st

    st.cache_resource.clear()
    gc.collect()


@pytest.fixture(scope="session")
def classifier_models(shared_builds):
    """A tiny Chinese classifier with a card and a tiny English regression model,
    built once per run (see helpers/classifier_helpers.py)."""
    from helpers.classifier_helpers import models
    from helpers.testing_utils import build_lock

    with build_lock(shared_builds, "classifier_models"):
        return models(shared_builds)


@pytest.fixture(scope="session")
def tagger_models(shared_builds):
    """A tiny Chinese tagger with a card, built once per run (helpers/span_task_helpers.py)."""
    from helpers.span_task_helpers import tagger_models as models
    from helpers.testing_utils import build_lock

    with build_lock(shared_builds, "tagger_models"):
        return models(shared_builds)


@pytest.fixture(scope="session")
def reader_models(shared_builds):
    """A tiny Chinese span QA model with a card, built once per run
    (helpers/span_task_helpers.py)."""
    from helpers.span_task_helpers import reader_models as models
    from helpers.testing_utils import build_lock

    with build_lock(shared_builds, "reader_models"):
        return models(shared_builds)
