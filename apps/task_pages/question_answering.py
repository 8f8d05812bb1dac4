"""The question-answering page: a span of a text that answers a question about it.

    streamlit run apps/app.py     # then "question answering" in the sidebar

It lists the exports whose ``assets.extra/albert_tf.json`` says ``"task": "span_qa"``
(``albert_tf.finetune --task=span_qa --export_dir``; ``configs/qa_en_pico.flags``
exports one). What this page owns: the question and context and their limits, the
answer highlighted in the context with its character offsets and score (exactly
``serving_default``'s output), how many windows the context took, the windows'
pieces, and the card's answer F1 beside the first-people-sentence baseline's. The
rest is the shared skeleton, ``apps/page.py``.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import Any

import streamlit as st
import tensorflow as tf

# Streamlit runs a page as a script: `streamlit run apps/app.py` puts apps/ on
# sys.path, AppTest.from_file on this page does not.
APPS_DIR = str(Path(__file__).resolve().parents[1])
if APPS_DIR not in sys.path:  # the script reruns on every interaction
    sys.path.insert(0, APPS_DIR)
from exported_models import SPAN_QA_TASKS  # noqa: E402
from page import Answer, Example, Field, TaskPage, held_out_metric, number  # noqa: E402

# Longer input is cut with a note (the SavedModel itself refuses 50,000 / 2,000).
MAX_CONTEXT_CHARS = 10_000
MAX_QUESTION_CHARS = 500
EXAMPLES = (
    # The PICO recipe's question, on a clinical-trial abstract.
    Example(
        "English",
        "en",
        {
            "question": "Who were the participants of this study?",
            "context": "Efficacy of a low-dose inhaled steroid in mild asthma: a randomized "
            "trial. We randomly assigned 120 adults aged 18 to 65 years with mild persistent "
            "asthma to budesonide or placebo for 12 weeks. The primary outcome was morning "
            "peak expiratory flow. Budesonide improved peak flow and reduced symptoms.",
        },
    ),
    Example(
        "中文",
        "zh",
        {
            "question": "ALBERT用什么任务代替了NSP？",
            "context": "ALBERT是一种轻量的BERT。它把词嵌入分解为两个小矩阵，并在所有层之间"
            "共享参数。它用句子顺序预测（SOP）代替了下一句预测（NSP），让模型学习句子之间的连贯性。",
        },
    ),
)
HIGHLIGHT = "#fde68a"


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


class QuestionAnsweringPage(TaskPage):
    title = "ALBERT question answering"
    caption = "Ask about a text: a small ALBERT answers with a span of it."
    tasks = SPAN_QA_TASKS
    task_name = "question answering"
    how_to_get_one = (
        "Fine-tune and export one (the PICO recipe exports to `models/exported/albert_qa_en_pico`):"
    )
    command = (
        "python -m albert_tf.finetune --flagfile=configs/qa_en_pico.flags"
        " --data_dir=PATH/TO/shared/data"
        "   # about 10 minutes on 2 CPU cores"
    )
    key = "qa"
    fields = (Field("question", "Question"), Field("context", "Context", height=180))
    examples = EXAMPLES
    tokens_title = "How the question and context were tokenised"

    def validate(self, values: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        question, context = values["question"], values["context"]
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
                    f"The {what} has {len(text):,} characters; only its first {limit:,} are "
                    "read here."
                )
        return {
            "question": question[:MAX_QUESTION_CHARS],
            "context": context[:MAX_CONTEXT_CHARS],
        }, notes

    def inputs(self, values: dict[str, Any]) -> dict[str, tf.Tensor]:
        return {
            "question": tf.constant([values["question"]]),
            "context": tf.constant([values["context"]]),
        }

    def warm_up_values(self, values: dict[str, str]) -> list[dict[str, str]]:
        # The example, and a context of several windows.
        return [values, values | {"context": values["context"] * 8}]

    def show_held_out(self, held: dict) -> None:
        f1, baseline = number(held.get("f1")), number(held.get("people_sentence_f1"))
        if f1 is None:
            return
        held_out_metric("Held-out answer F1", f1, baseline, "the first people sentence", ".3f")
        details = []
        if number(held.get("exact_match")) is not None:
            details.append(f"exact match {held['exact_match']:.3f}")
        if number(held.get("questions")) is not None:
            details.append(f"on {held['questions']:,.0f} held-out questions")
        st.sidebar.caption(" · ".join(details))

    def show_result(self, answer: Answer, left: Any, right: Any) -> None:
        context, result = answer.values["context"], answer.result
        text = result["answer"][0].decode("utf-8", "replace")
        start, end = int(result["start"][0]), int(result["end"][0])
        with left:
            if start < 0:
                st.info("No answer: the model finds none in this context.")
            else:
                st.success(f"**Answer:** {text}")
            st.markdown(highlighted(context, start, end), unsafe_allow_html=True)
        with right:
            st.metric("Score", f"{float(result['score'][0]):.3f}")
            st.metric("Characters", f"{start}–{end}" if start >= 0 else "none")
            st.metric("Windows read", f"{answer.packed['token_ids'].shape[0]}")

    def token_rows(self, answer: Answer) -> list[tuple[str | None, list[str]]]:
        windows = zip(answer.packed["pieces"], answer.packed["padding_mask"] > 0, strict=True)
        return [
            (f"Window {i + 1}", [p.decode("utf-8", "replace") for p in row[real]])
            for i, (row, real) in enumerate(windows)
        ]


QuestionAnsweringPage().run()
