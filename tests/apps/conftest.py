"""Session fixture: tiny English/Chinese multiple-choice models, built once."""

from __future__ import annotations

import sys

import pytest
from serving.mc_helpers import models


@pytest.fixture(scope="session")
def mc_models(tmp_path_factory):
    return models(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def _restore_main_module():
    """Streamlit's AppTest runs the app as ``__main__`` and leaves it in
    sys.modules; a later test that spawns processes would then make every
    child re-run the app script."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main
