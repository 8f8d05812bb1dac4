"""What every page of the Streamlit app needs to know about the exported models: finding
the ones of a task, reading their metadata, card and language, detecting the language
of a text and picking the model of that language. Only the standard library is
imported here (no Streamlit, no TensorFlow), so that these run in doctests too.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

AUTOMATIC = "Automatic: the model of the text's language"
LANGUAGE_NAMES = {"zh": "Chinese", "en": "English"}
UNK_WARNING_SHARE = 0.1

# The tasks `albert_tf.serving.export_saved_model` records in assets.extra/albert_tf.json
# (the names of `albert_tf.tasks`; the app reads SavedModels only, not the package).
# Exports older than text classification have no "task" key: they are multiple choice.
MULTIPLE_CHOICE_TASKS = ("multiple_choice", None)
CLASSIFICATION_TASKS = ("classification",)
TAGGING_TASKS = ("tagging",)
SPAN_QA_TASKS = ("span_qa",)

SPECIAL_PIECES = ("[CLS]", "[SEP]", "[PAD]", "<pad>", "")
UNKNOWN_PIECES = ("[UNK]", "<unk>")

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LETTER = re.compile(r"[^\W\d_]")


def models_dir(argv: list[str] | None = None) -> str:
    """The folder the pages load SavedModels from, fixed by whoever starts the app:
    ``--models_dir=PATH`` after ``--`` on streamlit's command line, else
    ``ALBERT_MODELS_DIR``, else ``models/exported``. Visitors only choose among the
    models found there: a SavedModel's graph can read and write the host's files, so
    the page must never load one from a path a visitor typed.

    Read on every run, not at import: this module stays imported across reruns (and
    across AppTest runs in one process).

    >>> models_dir(["--models_dir=/srv/models"]), models_dir(["--models_dir", "/m"])
    ('/srv/models', '/m')
    """
    argv = sys.argv[1:] if argv is None else argv
    for i, arg in enumerate(argv):
        if arg.startswith("--models_dir="):
            return arg.split("=", 1)[1]
        if arg == "--models_dir" and i + 1 < len(argv):
            return argv[i + 1]
    return os.environ.get("ALBERT_MODELS_DIR", "models/exported")


def detect_language(text: str) -> str:
    """``"zh"`` when at least a third of the letters are CJK characters, else ``"en"``.

    >>> detect_language("这个手机很好 ok"), detect_language("A fine phone 好")
    ('zh', 'en')
    """
    letters = len(_LETTER.findall(text))
    return "zh" if letters and len(_CJK.findall(text)) / letters >= 1 / 3 else "en"


def read_json(path: Path) -> dict:
    """The JSON object in ``path``; {} when the file is absent, unreadable or not an object
    (a broken card must not take the page down)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def model_info(path: Path) -> tuple[dict, dict]:
    """The export metadata and the model card (each {} when absent)."""
    extra = Path(path) / "assets.extra"
    return read_json(extra / "albert_tf.json"), read_json(extra / "model_card.json")


def model_task(path: Path) -> str | None:
    """The task the export recorded; None for exports that predate the key."""
    return model_info(path)[0].get("task")


def model_language(path: Path) -> str | None:
    """The language the model reads: the export metadata's ``language`` (the exporter
    always writes one), else the card's, else None."""
    meta, card = model_info(path)
    language = meta.get("language") or card.get("language")
    return language if isinstance(language, str) else None


def _versions(name_dir: Path, tasks: Collection[str | None]) -> list[Path]:
    if not name_dir.is_dir():
        return []
    return [
        p
        for p in name_dir.iterdir()
        if p.name.isdigit() and (p / "saved_model.pb").is_file() and model_task(p) in tasks
    ]


def find_models(root: str, tasks: Collection[str | None]) -> dict[str, Path]:
    """``{"NAME (version N)": path}``: the newest version of each SavedModel under
    ``root`` (``BASE``, ``BASE/NAME`` or a version folder) whose task is in ``tasks``."""
    base = Path(root)
    if (base / "saved_model.pb").is_file():
        if model_task(base) not in tasks:
            return {}
        return {f"{base.parent.name} (version {base.name})": base}
    found = {}
    candidates = [base] + (sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else [])
    for name_dir in candidates:
        versions = _versions(name_dir, tasks)
        if versions:
            newest = max(versions, key=lambda p: int(p.name))
            found[f"{name_dir.name} (version {newest.name})"] = newest
    return found


def choose_model(models: dict[str, Path], choice: str, language: str) -> tuple[str, str]:
    """The model to answer with, and why."""
    if choice != AUTOMATIC:
        return choice, "chosen in the sidebar"
    for name, path in models.items():
        if model_language(path) == language:
            return name, f"the text is {LANGUAGE_NAMES.get(language, language)}"
    name = next(iter(models))
    return name, f"no {LANGUAGE_NAMES.get(language, language)} model found; using the first one"


def unknown_share(pieces: Iterable[str]) -> float:
    """The share of real (non-special) pieces the vocabulary did not know."""
    real = [p for p in pieces if p not in SPECIAL_PIECES]
    return sum(p in UNKNOWN_PIECES for p in real) / max(len(real), 1)


def score_parts(
    result: Mapping[str, Sequence[Sequence[float]]], meta: Mapping
) -> tuple[dict[str, list[float]], str] | None:
    """The two parts of each option's score (first item of the batch) when the
    multiple-choice export adds the overlap to the model in its graph: its
    ``serving_default`` then also returns ``model_logits`` and ``overlap`` [B, C],
    and ``assets.extra/albert_tf.json`` holds the weights under
    ``overlap_combination``. Returns the table's columns and a line that says how
    they make the score; None for an export of the model alone.

    >>> meta = {"overlap_combination": {"model_weight": 0.5, "overlap_weight": 2.0}}
    >>> columns, how = score_parts({"model_logits": [[1.0, -2.0]], "overlap": [[0.25, 0.0]]}, meta)
    >>> columns
    {'model part': [0.5, -1.0], 'overlap part': [0.5, 0.0]}
    >>> how.split(" (")[0]
    "Each score is 0.5 × the model's logit + 2 × the overlap"
    >>> score_parts({"logits": [[1.0]]}, meta) is None
    True
    """
    if "model_logits" not in result or "overlap" not in result:
        return None
    logits = [float(x) for x in result["model_logits"][0]]
    overlap = [float(x) for x in result["overlap"][0]]
    combination = meta.get("overlap_combination")
    combination = combination if isinstance(combination, dict) else {}
    weights = [combination.get(k) for k in ("model_weight", "overlap_weight")]
    if not all(isinstance(w, int | float) and not isinstance(w, bool) for w in weights):
        # The parts without the weights that combine them: shown as they are.
        return {"model logit": logits, "overlap": overlap}, (
            "This export returns the model's logit and the overlap of each option, but "
            "not the weights that combine them into its score."
        )
    model_weight, overlap_weight = (float(w) for w in weights)
    columns = {
        "model part": [model_weight * x for x in logits],
        "overlap part": [overlap_weight * x for x in overlap],
    }
    return columns, (
        f"Each score is {model_weight:.3g} × the model's logit + {overlap_weight:.3g} × the "
        "overlap (the units an option shares with the context, length-normalised, weighted "
        "by rarity); the probabilities are their softmax."
    )
