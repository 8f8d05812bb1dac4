"""The package's layering (docs/architecture.md): imports point only down the list."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.paths import REPO

from albert_tf.cli import COMMANDS

PACKAGE = REPO / "albert_tf"

# Each area may import only areas before it. docs/architecture.md explains the order.
ORDER = [
    "storage",
    "hardware",
    "config",
    # albert_tf/tasks/: the registry and the specs (names only) sit here; each task's
    # parts sit at their own layer (`TASK_PARTS`), its task.py at "tasks" below.
    "task_registry",
    "kernels",
    "activations",
    "layers",
    "heads",
    "models",
    "presets",
    "model_size",
    "tokenizers",
    "checkpoints",
    "data",
    "training",
    "baselines",
    "analysis",
    "serving",
    "tasks",
    "recipes",
    "cli",
]
#: albert_tf/tasks/<task>/<part>.py → the area the part belongs to (albert_tf.tasks.spec.PARTS).
TASK_PARTS = {
    "head": "heads",
    "model": "models",
    "data": "data",
    "trainer": "training",
    "serving": "serving",
    "task": "tasks",
    # Other files of a task folder, at the layer of what they hold.
    "next_sentence": "data",  # multiple choice's items made from running text
}


def _task_area(parts: list[str]) -> str:
    """The area of ``albert_tf.tasks...`` given the names after ``albert_tf.tasks``."""
    if not parts:
        return "task_registry"  # the registry, albert_tf/tasks/__init__.py
    if parts in (["task"], ["run"]):
        return "tasks"  # the base class of the tasks' task.py; run_finetuning, which wires them
    if len(parts) >= 2 and parts[1] in TASK_PARTS:
        return TASK_PARTS[parts[1]]
    return "task_registry"  # spec.py and each task's __init__ (its spec)


def _area(module: str) -> str:
    parts = module.split(".")
    return _task_area(parts[2:]) if parts[1] == "tasks" else parts[1]


def _imports(path: Path) -> set[str]:
    """Areas of albert_tf that a file imports (``from albert_tf import x`` counts as x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "albert_tf":
                found |= {alias.name for alias in node.names}
            elif node.module == "albert_tf.tasks":
                # ``from albert_tf.tasks import multiple_choice`` names a spec package
                found.add("task_registry")
            elif node.module.startswith("albert_tf."):
                found.add(_area(node.module))
        elif isinstance(node, ast.Import):
            found |= {_area(a.name) for a in node.names if a.name.startswith("albert_tf.")}
    return found


def test_every_area_is_placed_in_the_order():
    areas = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }
    # albert_tf/<command>.py: `python -m albert_tf.<command>`, part of the cli area.
    assert set(COMMANDS) <= areas
    assert areas - {"__init__"} - set(COMMANDS) == set(ORDER) - {"task_registry"}


def test_imports_only_point_down():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py":
            continue  # the public names, gathered from everywhere
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        area = parts[0]
        area = "cli" if area in COMMANDS else area
        if area == "tasks":
            area = _task_area([p for p in parts[1:] if p != "__init__"])
        rank = ORDER.index(area)
        for imported in _imports(path) - {area}:
            if ORDER.index(imported) > rank:
                upward.append(f"{path.relative_to(PACKAGE.parent)} imports albert_tf.{imported}")
    assert not upward, "\n".join(upward)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """The albert_tf modules (not packages) ``path`` imports, at any depth of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("albert_tf"):
            for alias in node.names:
                found.add(f"{node.module}.{alias.name}")  # a submodule imported by name
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found & modules


def test_no_two_modules_import_each_other():
    # Packages' __init__ files gather public names and are left out; between
    # modules, an import cycle (even one inside a function) means two files share
    # one concept's home.
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    graph = {name: _module_imports(path, set(paths)) - {name} for name, path in paths.items()}
    cycles = []
    for name, imported in graph.items():
        stack, seen = list(imported), set()
        while stack:
            current = stack.pop()
            if current == name:
                cycles.append(name)
                break
            if current not in seen:
                seen.add(current)
                stack.extend(graph.get(current, ()))
    assert not cycles, f"modules on an import cycle: {sorted(cycles)}"
