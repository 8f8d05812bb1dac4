"""The named-entity page: which people, places and organisations a text names.

    streamlit run apps/app.py     # then "tagging" in the sidebar

It lists the exports whose ``assets.extra/albert_tf.json`` says ``"task": "tagging"``
(``albert_tf.finetune --task=tagging --export_dir``; ``configs/tag_zh_peoples_daily.flags``
exports one). What this page owns: the text and its limit, the text with each entity
on its type's colour, the table of entities with their character offsets and scores
(exactly ``serving_default``'s output), and the card's entity F1 beside a gazetteer's.
The rest is the shared skeleton, ``apps/page.py``.
"""

from __future__ import annotations

import html
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
from exported_models import TAGGING_TASKS  # noqa: E402
from page import (  # noqa: E402
    Answer,
    Example,
    Field,
    TaskPage,
    held_out_metric,
    number,
    scores_table,
)

# Longer input is cut with a note (the SavedModel itself refuses 20,000 characters).
MAX_TEXT_CHARS = 5000
EXAMPLES = (
    Example("中文", "zh", {"text": "江泽民主席在北京人民大会堂会见了美国总统克林顿。"}),
    Example(
        "English", "en", {"text": "president clinton met chinese leaders in beijing on monday."}
    ),
)
# One background per entity type, in the order types are first seen.
COLOURS = ["#fde68a", "#bfdbfe", "#bbf7d0", "#fecaca", "#ddd6fe", "#fed7aa"]


def entities_of(result: dict) -> pd.DataFrame:
    """``serving_default``'s padded outputs for one text as a table, padding dropped."""
    starts = result["starts"][0]
    keep = starts >= 0
    return pd.DataFrame(
        {
            "start": starts[keep].astype(int),
            "end": result["ends"][0][keep].astype(int),
            "label": [b.decode() for b in result["labels"][0][keep]],
            "score": result["scores"][0][keep].astype(float),
        }
    )


def highlighted(text: str, table: pd.DataFrame, colours: dict[str, str]) -> str:
    """The text as HTML with each entity on its type's colour (the text escaped)."""
    parts, at = [], 0
    for row in table.sort_values("start").itertuples():
        parts.append(html.escape(text[at : row.start]))
        colour = colours[row.label]
        entity = html.escape(text[row.start : row.end])
        parts.append(
            f'<mark style="background:{colour};padding:0 2px;border-radius:3px">'
            f"{entity}<sub style='font-size:0.7em'> {html.escape(row.label)}</sub></mark>"
        )
        at = row.end
    parts.append(html.escape(text[at:]))
    return "".join(parts).replace("\n", "<br>")


class TaggingPage(TaskPage):
    title = "ALBERT named entities"
    caption = "Which people, places and organisations does a text name? A small ALBERT tags it."
    tasks = TAGGING_TASKS
    task_name = "named entities"
    how_to_get_one = (
        "Fine-tune and export one (the People's Daily recipe exports to "
        "`models/exported/albert_ner_zh`):"
    )
    command = (
        "python -m albert_tf.finetune --flagfile=configs/tag_zh_peoples_daily.flags"
        " --data_dir=PATH/TO/shared/data"
        "   # about 35 minutes on 2 CPU cores"
    )
    key = "tag"
    fields = (Field("text", "Text", height=120),)
    examples = EXAMPLES
    tokens_title = "How the text was tokenised"

    def validate(self, values: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        text = values["text"]
        if not text.strip():
            raise ValueError("Enter a text to find its named entities in.")
        notes = []
        if len(text) > MAX_TEXT_CHARS:
            notes.append(
                f"The text has {len(text):,} characters; only its first {MAX_TEXT_CHARS:,} "
                "are tagged here."
            )
        return {"text": text[:MAX_TEXT_CHARS]}, notes

    def inputs(self, values: dict[str, Any]) -> dict[str, tf.Tensor]:
        return {"text": tf.constant([values["text"]])}

    def warm_up_values(self, values: dict[str, str]) -> list[dict[str, str]]:
        # A short text, the example, a long one.
        text = values["text"]
        return [{"text": text[:2]}, values, {"text": text * 20}]

    def card_summary(self, answer: Answer) -> str:
        tags = answer.meta.get("label_names") or []
        return "entities: " + ", ".join(sorted({t[2:] for t in tags if t != "O"}))

    def show_held_out(self, held: dict) -> None:
        f1, gazetteer = number(held.get("f1")), number(held.get("gazetteer_f1"))
        if f1 is None:
            return
        held_out_metric("Held-out entity F1", f1, gazetteer, "a gazetteer", ".3f")
        details = [
            f"{key} {held[key]:.3f}"
            for key in ("precision", "recall")
            if number(held.get(key)) is not None
        ]
        if number(held.get("texts")) is not None:
            details.append(f"on {held['texts']:,.0f} held-out texts")
        st.sidebar.caption(" · ".join(details))

    def show_result(self, answer: Answer, left: Any, right: Any) -> None:
        text = answer.values["text"]
        table = entities_of(answer.result)
        table.insert(
            0, "entity", [text[s:e] for s, e in zip(table["start"], table["end"], strict=True)]
        )
        types = list(dict.fromkeys(table["label"]))
        colours = {label: COLOURS[i % len(COLOURS)] for i, label in enumerate(types)}
        with left:
            st.markdown(highlighted(text, table, colours), unsafe_allow_html=True)
            if table.empty:
                st.info("No entity found in this text.")
            else:
                found = zip(table["entity"], table["label"], strict=True)
                st.success(
                    f"**{len(table)} entities:** "
                    + ", ".join(f"{entity} ({label})" for entity, label in found)
                )
        with right:
            st.metric("Pieces", f"{len(answer.pieces)}")
        scores_table(table, "score", "%.3f")

    def token_rows(self, answer: Answer) -> list[tuple[str | None, list[str]]]:
        return [(None, answer.pieces)]


TaggingPage().run()
