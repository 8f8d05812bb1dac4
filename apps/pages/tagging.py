"""Named entities with exported ALBERT tagging SavedModels, Chinese and English.

    streamlit run apps/multiple_choice.py     # then "tagging" in the sidebar

Models are raw-text SavedModels written by ``albert_tf.finetune --task=tagging
--export_dir`` (``configs/tag_zh_peoples_daily.flags`` exports one) under the models
folder the other pages use, default ``models/exported`` (``-- --models_dir=PATH`` or
``ALBERT_MODELS_DIR`` when the app starts), each as ``NAME/<version>/``. Only exports
whose ``assets.extra/albert_tf.json`` says ``"task": "tagging"`` are listed. The page
colours each entity in the text, lists them with their character offsets and scores,
and shows the model's card; everything comes from the SavedModel's
``serving_default`` and ``tokenize`` signatures, with only tensorflow and
tensorflow_text.
"""

from __future__ import annotations

import html
import sys
import time
from pathlib import Path

import pandas as pd
import streamlit as st
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

# As the other pages: apps/ on sys.path under AppTest too.
APPS_DIR = str(Path(__file__).resolve().parents[1])
if APPS_DIR not in sys.path:
    sys.path.insert(0, APPS_DIR)
from exported_models import (  # noqa: E402
    AUTOMATIC,
    LANGUAGE_NAMES,
    TAGGING_TASKS,
    UNK_WARNING_SHARE,
    choose_model,
    detect_language,
    find_models,
    model_info,
    models_dir,
    unknown_share,
)

TRAIN_COMMAND = (
    "python -m albert_tf.finetune --flagfile=configs/tag_zh_peoples_daily.flags"
    "   # about 35 minutes on 2 CPU cores"
)
# Longer input is cut with a note (the SavedModel itself refuses 20,000 characters).
MAX_TEXT_CHARS = 5000
EXAMPLES = {
    "中文": "江泽民主席在北京人民大会堂会见了美国总统克林顿。",
    "English": "president clinton met chinese leaders in beijing on monday.",
}
# One background per entity type, in the order types are first seen.
COLOURS = ["#fde68a", "#bfdbfe", "#bbf7d0", "#fecaca", "#ddd6fe", "#fed7aa"]


@st.cache_resource(show_spinner="Loading the SavedModel…")
def load_saved_model(path: str):
    """Loaded and warmed once per path and process; every rerun reuses it."""
    model = tf.saved_model.load(path)
    for sample in ("北京", EXAMPLES["中文"], EXAMPLES["English"] * 20):
        model.signatures["serving_default"](text=tf.constant([sample]))
    return model


def set_example() -> None:
    st.session_state.tag_text = EXAMPLES[st.session_state.tag_example]


def validate(text: str) -> tuple[str, list[str]]:
    """The text cut to what the page sends, and notes; ValueError when it is empty."""
    if not text.strip():
        raise ValueError("Enter a text to find its named entities in.")
    notes = []
    if len(text) > MAX_TEXT_CHARS:
        notes.append(
            f"The text has {len(text):,} characters; only its first {MAX_TEXT_CHARS:,} are "
            "tagged here."
        )
    return text[:MAX_TEXT_CHARS], notes


def entities_of(result: dict) -> pd.DataFrame:
    """The SavedModel's padded outputs for one text as a table, padding dropped."""
    starts = result["starts"].numpy()[0]
    keep = starts >= 0
    return pd.DataFrame(
        {
            "start": starts[keep].astype(int),
            "end": result["ends"].numpy()[0][keep].astype(int),
            "label": [b.decode() for b in result["labels"].numpy()[0][keep]],
            "score": result["scores"].numpy()[0][keep].astype(float),
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


def show_model_card(name: str, meta: dict, card: dict) -> None:
    """The sidebar card; every key is optional."""
    st.sidebar.subheader("Model card")
    tags = meta.get("label_names") or []
    types = sorted({t[2:] for t in tags if t != "O"})
    st.sidebar.markdown(
        f"**{name}** · language: {meta.get('language', '?')} · entities: {', '.join(types)}"
    )
    if not card:
        st.sidebar.caption("no model card was exported with this model")
        return
    for key, title in (("task", "Task"), ("trained_on", "Trained on")):
        if card.get(key):
            st.sidebar.markdown(f"**{title}:** {card[key]}")
    if card.get("finetuning"):
        st.sidebar.caption(f"Fine-tuning: {card['finetuning']}")
    held = card.get("held_out") if isinstance(card.get("held_out"), dict) else {}
    if isinstance(held.get("f1"), int | float):
        gazetteer = held.get("gazetteer_f1")
        delta = (
            f"{held['f1'] - gazetteer:+.3f} vs a gazetteer {gazetteer:.3f}"
            if isinstance(gazetteer, int | float)
            else None
        )
        st.sidebar.metric("Held-out entity F1", f"{held['f1']:.3f}", delta)
        details = [f"{key} {held[key]:.3f}" for key in ("precision", "recall") if key in held]
        if "texts" in held:
            details.append(f"on {held['texts']:,} held-out texts")
        st.sidebar.caption(" · ".join(details))


def main() -> None:
    st.set_page_config(page_title="ALBERT named entities", layout="wide")
    st.title("ALBERT named entities")
    st.caption("Which people, places and organisations does a text name? A small ALBERT tags it.")

    folder = models_dir()
    st.sidebar.caption(f"Models folder: `{folder}`")  # read-only: set when the app starts
    models = find_models(folder, TAGGING_TASKS)
    if not models:
        st.error(
            f"No exported model found in `{folder}` for named entities. Fine-tune and "
            "export one (the People's Daily recipe exports to `models/exported/albert_ner_zh`):"
        )
        st.code(TRAIN_COMMAND, language="bash")
        st.stop()
    choice = st.sidebar.selectbox("Model", [AUTOMATIC, *models])

    if "tag_text" not in st.session_state:  # keys apart from the other pages'
        st.session_state.tag_example = "中文"
        set_example()
    st.radio("Example", list(EXAMPLES), key="tag_example", horizontal=True, on_change=set_example)
    text = st.text_area("Text", key="tag_text", height=120)
    try:
        text, notes = validate(text)
    except ValueError as err:
        st.warning(str(err))
        st.stop()
    for note in notes:
        st.info(note)

    name, reason = choose_model(models, choice, detect_language(text))
    meta, card = model_info(models[name])
    model = load_saved_model(str(models[name]))
    inputs = {"text": tf.constant([text])}
    start = time.perf_counter()
    result = model.signatures["serving_default"](**inputs)
    latency_ms = 1000 * (time.perf_counter() - start)
    pieces = model.signatures["tokenize"](**inputs)["pieces"].numpy()[0]
    pieces = [p.decode("utf-8", "replace") for p in pieces if p]
    show_model_card(name, meta, card)

    st.caption(
        f"Answered by **{name}** ({LANGUAGE_NAMES.get(meta.get('language'), '?')}): {reason}."
    )
    unknown = unknown_share(pieces)
    if unknown > UNK_WARNING_SHARE:
        st.warning(
            f"{unknown:.0%} of the text's pieces are unknown to this model's vocabulary "
            "([UNK]); its entities mean little."
        )
    table = entities_of(result)
    table.insert(
        0, "entity", [text[s:e] for s, e in zip(table["start"], table["end"], strict=True)]
    )
    labels = list(dict.fromkeys(table["label"]))
    colours = {label: COLOURS[i % len(COLOURS)] for i, label in enumerate(labels)}
    left, right = st.columns([3, 1])
    with left:
        st.markdown(highlighted(text, table, colours), unsafe_allow_html=True)
        if table.empty:
            st.info("No entity found in this text.")
        else:
            st.success(
                f"**{len(table)} entities:** "
                + ", ".join(
                    f"{e} ({label})"
                    for e, label in zip(table["entity"], table["label"], strict=True)
                )
            )
    with right:
        st.metric("Latency (serving_default, warm)", f"{latency_ms:.1f} ms")
        st.metric("Pieces", f"{len(pieces)}")
    st.dataframe(
        table,
        hide_index=True,
        column_config={
            "score": st.column_config.ProgressColumn(
                "score", format="%.3f", min_value=0.0, max_value=1.0
            ),
        },
    )
    with st.expander("How the text was tokenised", expanded=False):
        st.code(" ".join(pieces), language=None)


main()
