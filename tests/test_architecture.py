"""The package's layering (docs/architecture.md): imports point only down the list.

An import is a module that a file names: an ``import`` statement, or a string that
loads a module later (``importlib.import_module("albert_tf...")``, a ``"albert_tf..."``
module string in a dict such as the ``_EXPORTS`` of a package's public names, a lazy
``"module:attribute"``) and ``TaskSpec.load("<part>")``, which reaches that part's layer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers.paths import REPO

from albert_tf.cli import COMMANDS
from albert_tf.tasks import TASKS
from albert_tf.tasks.spec import PARTS

PACKAGE = REPO / "albert_tf"
#: The longest a module of albert_tf/ or apps/ may be: past it, split it by job.
MAX_MODULE_LINES = 600

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
    "predict": "tasks",
    # Other files of a task folder, at the layer of what they hold.
    "next_sentence": "data",  # multiple choice's items made from running text
    "preprocessing": "data",  # texts → a task's model inputs, for training and serving
    "decoding": "data",  # a task's model outputs → its answers, for evaluation and serving
}


def _task_area(parts: list[str]) -> str:
    """The area of ``albert_tf.tasks...`` given the names after ``albert_tf.tasks``."""
    if not parts:
        return "task_registry"  # the registry, albert_tf/tasks/__init__.py
    if parts in (["task"], ["run"], ["predictions"]):
        return "tasks"  # the tasks' base class, run_finetuning and predict_file, which wire them
    if len(parts) >= 2 and parts[1] in TASK_PARTS:
        return TASK_PARTS[parts[1]]
    return "task_registry"  # spec.py and each task's __init__ (its spec)


def _area(module: str) -> str:
    parts = module.split(".")
    return _task_area(parts[2:]) if parts[1] == "tasks" else parts[1]


#: A string that names a module of the package, or an attribute of one (``module:attr``).
_MODULE_STRING = re.compile(r"albert_tf(\.\w+)+(:\w+)?")


def _all_modules() -> set[str]:
    """Every module and package of albert_tf, by dotted name."""
    return {_module_name(p) for p in PACKAGE.rglob("*.py")}


def _string_imports(tree: ast.AST) -> set[str]:
    """The albert_tf modules a file loads by name: the argument of ``import_module`` or
    ``__import__``, module strings among a dict's values (``_EXPORTS``, and the value
    of ``dict.fromkeys``), and ``"module:attribute"`` strings anywhere (lazy parts)."""
    named: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = getattr(node.func, "attr", getattr(node.func, "id", None))
            if called in ("import_module", "__import__") and node.args:
                named.append(node.args[0])
            elif called == "fromkeys" and len(node.args) == 2:
                named.append(node.args[1])
        elif isinstance(node, ast.Dict):
            named += node.values
        elif isinstance(node, ast.Constant) and ":" in str(node.value):
            named.append(node)
    modules = _all_modules()
    found = set()
    for value in named:
        text = value.value if isinstance(value, ast.Constant) else None
        if isinstance(text, str) and _MODULE_STRING.fullmatch(text):
            module = text.partition(":")[0]
            if module in modules:  # not a file name such as "albert_tf.json"
                found.add(module)
    return found


def _part_loads(tree: ast.AST) -> set[str]:
    """Areas a file reaches through ``TaskSpec.load("<part>")`` (`PARTS`)."""
    return {
        PARTS[node.args[0].value]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "load"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in PARTS
    }


def _imports(path: Path) -> set[str]:
    """Areas of albert_tf that a file imports (``from albert_tf import x`` counts as x),
    by statement, by a module's name in a string, or by loading a task's part."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {_area(module) for module in _string_imports(tree)} | _part_loads(tree)
    for node in ast.walk(tree):
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
    """The albert_tf modules (not packages) ``path`` imports, at any depth of the file,
    by statement or by name in a string (`_string_imports`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = _string_imports(tree)
    for node in ast.walk(tree):
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


def test_task_parts_sit_at_their_layer():
    # A spec names its parts by string, loaded on first use: each part's module must
    # exist and sit at the layer of its part name, as the rank table says (a file name
    # it leaves out ranks with the registry).
    assert {part: TASK_PARTS.get(part, "task_registry") for part in PARTS} == PARTS
    modules = _all_modules()
    misplaced = [
        f"{spec.name}: {part} = {where!r}"
        for spec in TASKS.values()
        for part, where in spec.parts.items()
        if where.partition(":")[0] not in modules or _area(where.partition(":")[0]) != PARTS[part]
    ]
    assert not misplaced, f"parts not at their part's layer ({PARTS}): {misplaced}"


def test_string_imports_are_seen(tmp_path):
    source = tmp_path / "lazy.py"
    source.write_text(
        "import importlib\n"
        '_EXPORTS = {"Trainer": "albert_tf.training.finetuning.trainer"}\n'
        'WHERE = dict.fromkeys(["a"], "albert_tf.data.corpus")\n'
        'PART = "albert_tf.tasks.tagging.model:AlbertTokenClassifier"\n'
        'importlib.import_module("albert_tf.serving.export")\n'
        'spec.load("trainer")\n'
        'NOT_A_MODULE = {"meta": "albert_tf.json"}\n'
    )
    assert _imports(source) == {"training", "data", "models", "serving"}


def test_no_module_is_longer_than_the_limit():
    # A longer module holds more than one job: split it (docs/architecture.md).
    paths = sorted([*PACKAGE.rglob("*.py"), *(REPO / "apps").rglob("*.py")])
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in paths}
    long = [f"{p.relative_to(REPO)}: {n}" for p, n in lengths.items() if n > MAX_MODULE_LINES]
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
