"""The text-classification page: which label fits a text, or a pair of texts.

    streamlit run apps/app.py     # then "classification" in the sidebar

It lists the exports whose ``assets.extra/albert_tf.json`` says ``"task":
"classification"`` (``albert_tf.finetune --task=classification --export_dir``, or
``python -m albert_tf.export`` on a fine-tuned classifier). What this page owns: the
text and optional second text, their limits, each label's probability (named by the
export's ``label_names``) or a regression model's score, the card's accuracy against
its strongest simple reference, and the tokenisation by segment. The rest is the
shared skeleton, ``apps/page.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
import tensorflow as tf

# Streamlit runs a page as a script: `streamlit run apps/app.py` puts apps/ on
# sys.path, AppTest.from_file on this page does not.
APPS_DIR = str(Path(__file__).resolve().parents[1])
if APPS_DIR not in sys.path:  # the script reruns on every interaction
    sys.path.insert(0, APPS_DIR)
from exported_models import CLASSIFICATION_TASKS  # noqa: E402
from page import (  # noqa: E402
    Answer,
    Example,
    Field,
    TaskPage,
    held_out_metric,
    number,
    scores_table,
)

# Longer input is cut, with a note, instead of making the visitor wait: the model
# reads at most max_seq_length pieces of text and pair together anyway (the
# SavedModel itself refuses rows over 100,000 characters).
MAX_TEXT_CHARS = 2000
MAX_PAIR_CHARS = 2000

EXAMPLES = (
    Example(
        "中文", "zh", {"text": "这个手机用了一个月，电池很耐用，屏幕也清楚，推荐购买。", "pair": ""}
    ),
    Example(
        "English",
        "en",
        {
            "text": "The battery lasts two days and the screen is sharp. "
            "I would buy this phone again.",
            "pair": "",
        },
    ),
)


def references(held: dict) -> dict[str, float]:
    """What the card compares the model with: chance, the majority class, baselines."""
    found = {}
    for key, value in held.items():
        reference = key in ("chance", "majority", "majority_class") or "baseline" in key
        if reference and number(value) is not None:
            name = "majority class" if key.startswith("majority") else key.replace("_", " ")
            found[name] = float(value)
    baselines = held.get("baselines")
    if isinstance(baselines, dict):
        found |= {str(k): float(v) for k, v in baselines.items() if number(v) is not None}
    return found


def label_names(meta: dict, count: int) -> list[str]:
    """The export's label names, or numbered labels when they are missing or do not fit."""
    names = meta.get("label_names")
    if isinstance(names, list) and len(names) == count:
        return [str(n) for n in names]
    return [f"label {i}" for i in range(count)]


def labels(answer: Answer) -> list[str] | None:
    """The labels the answer's probabilities are for; None for a regression model."""
    if "score" in answer.result:
        return None
    return label_names(answer.meta, len(answer.result["probabilities"][0]))


class ClassificationPage(TaskPage):
    title = "ALBERT text classification"
    caption = "Which label fits a text, or a pair of texts? A small fine-tuned ALBERT answers."
    tasks = CLASSIFICATION_TASKS
    task_name = "text classification"
    how_to_get_one = (
        "Fine-tune and export one (the Chinese product-review sentiment recipe exports to "
        "`models/exported/albert_reviews_zh`):"
    )
    command = (
        "python -m albert_tf.finetune --flagfile=configs/classify_zh_reviews.flags"
        " --data_dir=PATH/TO/shared/data"
        "   # about 17 minutes on 2 CPU cores"
    )
    key = "clf"
    fields = (
        Field("text", "Text", height=120),
        Field(
            "pair",
            "Second text (optional: for tasks on pairs, e.g. a premise and a hypothesis)",
            height=80,
        ),
    )
    examples = EXAMPLES

    def validate(self, values: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        text, pair = values["text"], values["pair"]
        if not text.strip():
            raise ValueError("Enter a text to classify (the second text is optional).")
        notes = []
        for what, value, limit in (
            ("text", text, MAX_TEXT_CHARS),
            ("second text", pair, MAX_PAIR_CHARS),
        ):
            if len(value) > limit:
                notes.append(
                    f"The {what} has {len(value):,} characters; only its first {limit:,} are "
                    "sent (the model reads at most its max_seq_length pieces anyway)."
                )
        return {"text": text[:MAX_TEXT_CHARS], "pair": pair[:MAX_PAIR_CHARS]}, notes

    def inputs(self, values: dict[str, Any]) -> dict[str, tf.Tensor]:
        return {"text": tf.constant([values["text"]]), "text_pair": tf.constant([values["pair"]])}

    def warm_up_values(self, values: dict[str, str]) -> list[dict[str, str]]:
        # A short text, the example, a pair, a text that fills max_seq_length.
        text = values["text"]
        pairs = ((text[:8], ""), (text, ""), (text, text), (text * 40, ""))
        return [{"text": t, "pair": p} for t, p in pairs]

    def card_summary(self, answer: Answer) -> str:
        names = labels(answer)
        return f"labels: {', '.join(names)}" if names else "regression: one score"

    def show_held_out(self, held: dict) -> None:
        accuracy = number(held.get("accuracy"))
        found = references(held)
        if accuracy is not None:
            # Against the strongest simple reference: beating chance alone says little.
            name, reference = max(found.items(), key=lambda item: item[1], default=("", None))
            held_out_metric("Held-out accuracy", accuracy, reference, name, ".1%")
        for key, title in (("pearson", "Held-out Pearson r"), ("spearman", "Held-out Spearman ρ")):
            if number(held.get(key)) is not None:
                st.sidebar.metric(title, f"{held[key]:.3f}")
        details = []
        stderr, items = number(held.get("accuracy_stderr")), number(held.get("items"))
        if stderr is not None:
            details.append(f"± {stderr:.1%} (one standard error)")
        if items is not None:
            details.append(f"on {items:,.0f} held-out items")
        if found:
            details.append("; ".join(f"{k} {v:.1%}" for k, v in found.items()))
        for key in ("macro_f1", "mcc"):
            if number(held.get(key)) is not None:
                details.append(f"{key.replace('_', ' ')} {held[key]:.3f}")
        if details:
            st.sidebar.caption(" · ".join(details))

    def show_result(self, answer: Answer, left: Any, right: Any) -> None:
        length = len(answer.pieces)
        max_seq_length = answer.meta.get("max_seq_length")
        names = labels(answer)
        with left:
            if length == max_seq_length:
                st.info(
                    f"The input fills the model's max_seq_length ({max_seq_length} pieces): the "
                    "pieces past it were not read (the longer of text and second text loses "
                    "its end first)."
                )
            if names is None:
                score = float(answer.result["score"][0])
                st.success(f"**Score:** {score:.4f}  (a regression model: one number, no labels)")
                table = pd.DataFrame({"score": [score], "pieces": [length]})
            else:
                probabilities = answer.result["probabilities"][0]
                prediction = int(answer.result["prediction"][0])
                st.success(f"**Label:** {names[prediction]}  ({probabilities[prediction]:.1%})")
                table = pd.DataFrame(
                    {"label": names, "probability": [float(p) for p in probabilities]}
                )
                st.bar_chart(table.set_index("label"), horizontal=True)
        with right:
            st.metric("Pieces", f"{length} of {max_seq_length}")
        scores_table(table, "probability", "%.4f")

    def token_rows(self, answer: Answer) -> list[tuple[str | None, list[str]]]:
        real = answer.packed["padding_mask"][0] > 0
        segments = answer.packed["segment_ids"][0][real]
        rows = []
        for segment, title in ((0, "Text (segment 0)"), (1, "Second text (segment 1)")):
            tokens = [p for p, s in zip(answer.pieces, segments, strict=True) if s == segment]
            if tokens:
                rows.append((title, tokens))
        return rows


ClassificationPage().run()
