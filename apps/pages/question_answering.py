"""Extractive question answering with exported ALBERT span QA SavedModels, Chinese and English.

    streamlit run apps/multiple_choice.py     # then "question answering" in the sidebar

Models are raw-text SavedModels written by ``albert_tf.finetune --task=span_qa
--export_dir`` (``configs/qa_en_pico.flags`` exports one) under the models folder the
other pages use, default ``models/exported`` (``-- --models_dir=PATH`` or
``ALBERT_MODELS_DIR`` when the app starts), each as ``NAME/<version>/``. Only exports
whose ``assets.extra/albert_tf.json`` says ``"task": "span_qa"`` are listed. The page
highlights the answer in the context and shows its character offsets, its score and
the model's card; everything comes from the SavedModel's ``serving_default`` and
``tokenize`` signatures, with only tensorflow and tensorflow_text.
"""

from __future__ import annotations

import html
import sys
import time
from pathlib import Path

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
    SPAN_QA_TASKS,
    UNK_WARNING_SHARE,
    choose_model,
    detect_language,
    find_models,
    model_info,
    models_dir,
    unknown_share,
)

TRAIN_COMMAND = (
    "python -m albert_tf.finetune --flagfile=configs/qa_en_pico.flags"
    "   # about 10 minutes on 2 CPU cores"
)
# Longer input is cut with a note (the SavedModel itself refuses 50,000 / 2,000).
MAX_CONTEXT_CHARS = 10_000
MAX_QUESTION_CHARS = 500
EXAMPLES = {
    "English": (
        "Who were the participants of this study?",
        "Efficacy of a low-dose inhaled steroid in mild asthma: a randomized trial. "
        "We randomly assigned 120 adults aged 18 to 65 years with mild persistent asthma "
        "to budesonide or placebo for 12 weeks. The primary outcome was morning peak "
        "expiratory flow. Budesonide improved peak flow and reduced symptoms.",
    ),
    "中文": (
        "ALBERT用什么任务代替了NSP？",
        "ALBERT是一种轻量的BERT。它把词嵌入分解为两个小矩阵，并在所有层之间共享参数。"
        "它用句子顺序预测（SOP）代替了下一句预测（NSP），让模型学习句子之间的连贯性。",
    ),
}
HIGHLIGHT = "#fde68a"


@st.cache_resource(show_spinner="Loading the SavedModel…")
def load_saved_model(path: str):
    """Loaded and warmed once per path and process; every rerun reuses it."""
    model = tf.saved_model.load(path)
    for question, context in EXAMPLES.values():
        model.signatures["serving_default"](
            question=tf.constant([question]), context=tf.constant([context])
        )
    return model


def set_example() -> None:
    question, context = EXAMPLES[st.session_state.qa_example]
    st.session_state.qa_question, st.session_state.qa_context = question, context


def validate(question: str, context: str) -> tuple[str, str, list[str]]:
    """The question and context cut to what the page sends, and notes; ValueError
    naming what is missing."""
    if not question.strip():
        raise ValueError("Enter a question.")
    if not context.strip():
        raise ValueError("Enter a context: the text the answer is taken from.")
    notes = []
    for what, text, limit in (
        ("question", question, MAX_QUESTION_CHARS),
        ("context", context, MAX_CONTEXT_CHARS),
    ):
        if len(text) > limit:
            notes.append(
                f"The {what} has {len(text):,} characters; only its first {limit:,} are read here."
            )
    return question[:MAX_QUESTION_CHARS], context[:MAX_CONTEXT_CHARS], notes


def highlighted(context: str, start: int, end: int) -> str:
    """The context as HTML with the answer marked (the text escaped)."""
    if start < 0:
        return html.escape(context).replace("\n", "<br>")
    parts = [
        html.escape(context[:start]),
        f'<mark style="background:{HIGHLIGHT};padding:0 2px;border-radius:3px">'
        f"{html.escape(context[start:end])}</mark>",
        html.escape(context[end:]),
    ]
    return "".join(parts).replace("\n", "<br>")


def show_model_card(name: str, meta: dict, card: dict) -> None:
    """The sidebar card; every key is optional."""
    st.sidebar.subheader("Model card")
    st.sidebar.markdown(f"**{name}** · language: {meta.get('language', '?')}")
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
        baseline = held.get("people_sentence_f1")
        delta = (
            f"{held['f1'] - baseline:+.3f} vs the first people sentence {baseline:.3f}"
            if isinstance(baseline, int | float)
            else None
        )
        st.sidebar.metric("Held-out answer F1", f"{held['f1']:.3f}", delta)
        details = []
        if isinstance(held.get("exact_match"), int | float):
            details.append(f"exact match {held['exact_match']:.3f}")
        if "questions" in held:
            details.append(f"on {held['questions']:,} held-out questions")
        st.sidebar.caption(" · ".join(details))


def main() -> None:
    st.set_page_config(page_title="ALBERT question answering", layout="wide")
    st.title("ALBERT question answering")
    st.caption("Ask about a text: a small ALBERT answers with a span of it.")

    folder = models_dir()
    st.sidebar.caption(f"Models folder: `{folder}`")  # read-only: set when the app starts
    models = find_models(folder, SPAN_QA_TASKS)
    if not models:
        st.error(
            f"No exported model found in `{folder}` for question answering. Fine-tune and "
            "export one (the PICO recipe exports to `models/exported/albert_qa_en_pico`):"
        )
        st.code(TRAIN_COMMAND, language="bash")
        st.stop()
    choice = st.sidebar.selectbox("Model", [AUTOMATIC, *models])

    if "qa_question" not in st.session_state:  # keys apart from the other pages'
        st.session_state.qa_example = "English"
        set_example()
    st.radio("Example", list(EXAMPLES), key="qa_example", horizontal=True, on_change=set_example)
    question = st.text_input("Question", key="qa_question")
    context = st.text_area("Context", key="qa_context", height=180)
    try:
        question, context, notes = validate(question, context)
    except ValueError as err:
        st.warning(str(err))
        st.stop()
    for note in notes:
        st.info(note)

    name, reason = choose_model(models, choice, detect_language(context))
    meta, card = model_info(models[name])
    model = load_saved_model(str(models[name]))
    inputs = {"question": tf.constant([question]), "context": tf.constant([context])}
    start_time = time.perf_counter()
    result = model.signatures["serving_default"](**inputs)
    latency_ms = 1000 * (time.perf_counter() - start_time)
    windows = model.signatures["tokenize"](**inputs)
    pieces = [p.decode("utf-8", "replace") for p in windows["pieces"].numpy().ravel()]
    show_model_card(name, meta, card)

    st.caption(
        f"Answered by **{name}** ({LANGUAGE_NAMES.get(meta.get('language'), '?')}): {reason}."
    )
    unknown = unknown_share(pieces)
    if unknown > UNK_WARNING_SHARE:
        st.warning(
            f"{unknown:.0%} of the pieces are unknown to this model's vocabulary ([UNK]); "
            "its answer means little."
        )
    answer = result["answer"].numpy()[0].decode("utf-8", "replace")
    start, end = int(result["start"].numpy()[0]), int(result["end"].numpy()[0])
    score = float(result["score"].numpy()[0])
    left, right = st.columns([3, 1])
    with left:
        if start < 0:
            st.info("No answer: the model finds none in this context.")
        else:
            st.success(f"**Answer:** {answer}")
        st.markdown(highlighted(context, start, end), unsafe_allow_html=True)
    with right:
        st.metric("Score", f"{score:.3f}")
        st.metric("Characters", f"{start}–{end}" if start >= 0 else "none")
        st.metric("Windows read", f"{windows['token_ids'].shape[0]}")
        st.metric("Latency (serving_default, warm)", f"{latency_ms:.1f} ms")
    with st.expander("How the question and context were tokenised", expanded=False):
        for row in windows["pieces"].numpy():
            st.code(" ".join(p.decode("utf-8", "replace") for p in row if p), language=None)


main()
