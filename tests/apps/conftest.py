"""Session fixture: tiny English/Chinese multiple-choice models, built once."""

from __future__ import annotations

import pytest
from serving.mc_helpers import models


@pytest.fixture(scope="session")
def mc_models(tmp_path_factory):
    return models(tmp_path_factory.getbasetemp())
