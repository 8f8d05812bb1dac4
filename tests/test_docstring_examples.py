"""Every docstring example in the package runs and prints what it claims.

Modules are found by walking the package for ``>>>``, so a new example is tested
without a list to update. A module whose examples are all ``+SKIP`` (they need a
trained model or a long run) is reported as skipped, not as passed.
"""

import doctest
import importlib

import pytest
from helpers.paths import REPO

PACKAGE = REPO / "albert_tf"


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_discovery_finds_the_package_examples():
    # A broken walk would otherwise pass by collecting nothing.
    assert {"albert_tf.config", "albert_tf.layers.encoder", "albert_tf.data"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if result.attempted == 0:
        pytest.skip(f"{name}: every example is +SKIP")
