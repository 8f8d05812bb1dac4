"""The TPU install route (BUILD.md, "TPU") stays in step with pyproject.toml."""

from __future__ import annotations

import pathlib
import re
import tomllib

from helpers.paths import REPO as ROOT

# What requires the `tensorflow` distribution, which tensorflow-tpu does not count as.
TENSORFLOW_FAMILY = {"tensorflow", "tensorflow-text", "tensorboard", "keras-hub"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\s\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _lines(path: pathlib.Path) -> list[str]:
    return [
        line.strip()
        for line in path.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def test_requirements_tpu_are_the_runtime_dependencies_without_tensorflow():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = {r for r in project["dependencies"] if _name(r) not in TENSORFLOW_FAMILY}
    listed = set(_lines(ROOT / "requirements-tpu.txt"))
    assert expected <= listed, f"missing from requirements-tpu.txt: {sorted(expected - listed)}"
    assert not {_name(r) for r in listed} & TENSORFLOW_FAMILY


def test_the_tpu_constraints_pin_every_requirement_and_a_matching_tensorflow():
    pins = dict(line.split("==") for line in _lines(ROOT / "constraints-tpu.txt"))
    pins = {_name(name): version for name, version in pins.items()}
    for requirement in _lines(ROOT / "requirements-tpu.txt"):
        assert _name(requirement) in pins, requirement
    tensorflow, text = pins["tensorflow-tpu"], pins["tensorflow-text"]
    # tensorflow-text's ops load only into the TensorFlow release they were built for.
    assert tensorflow.split(".")[:2] == text.split(".")[:2]
    assert "tensorflow" not in pins  # the CPU wheel would overwrite the TPU one
    assert "libtpu" in pins
