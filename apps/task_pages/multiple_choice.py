"""The multiple-choice page: which option continues the context, Chinese and English.

    streamlit run apps/app.py     # the app's first page

It lists the exports whose ``assets.extra/albert_tf.json`` says ``"task":
"multiple_choice"`` (or no task: exports older than text classification). The
repository ships two, ``albert_demo_zh`` and ``albert_demo_en``; ``python -m
albert_tf.demo_models`` rebuilds them. What this page owns: the context, question and
options, their limits, the card's figures for the demo's own use (a one-sentence
context beside the baseline: the strongest rule of counting shared characters or
words), each option's probability and truncation flags, and, for an export that adds
that overlap to the model's score in its graph, both parts of each score. The rest is
the shared skeleton, ``apps/page.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
import tensorflow as tf

# Streamlit runs a page as a script, not as a module of a package: `streamlit run
# apps/app.py` puts apps/ on sys.path, AppTest.from_file on this page does not.
APPS_DIR = str(Path(__file__).resolve().parents[1])
if APPS_DIR not in sys.path:  # the script reruns on every interaction
    sys.path.insert(0, APPS_DIR)
from exported_models import MULTIPLE_CHOICE_TASKS, score_parts  # noqa: E402
from page import Answer, Example, Field, TaskPage, number  # noqa: E402

# Larger inputs get a message instead of a long wait: the model reads at most
# max_seq_length pieces per option anyway.
MAX_OPTIONS = 20
MAX_CONTEXT_CHARS = 2000
MAX_OPTION_CHARS = 500


def _example(label: str, language: str, context: str, options: list[str]) -> Example:
    values = {"context": context, "question": "", "options": "\n".join(options)}
    return Example(label, language, values)


EXAMPLES = (
    _example(
        "中文",
        "zh",
        "算法组的成员们精通各种AI算法.",
        [
            "成都动物园里的大熊猫人人都想摸一下.",
            "他们主要负责AI算法的研究和落地.",
            "我没吃上吉士果.",
            "你吃饭了吗?",
        ],
    ),
    _example(
        "English",
        "en",
        "The President told Congress that the nation's farms had suffered a hard year. "
        "Drought had ruined the harvest across the western states.",
        [
            "Elizabeth laughed and said she would not dance with him again.",
            "He asked for relief for the farmers who had lost their crops.",
            "And the LORD spake unto Moses, saying,",
            "The committee adjourned until the following morning.",
        ],
    ),
)


def strongest_baseline(held: dict) -> tuple[str, float] | None:
    """The card's "baseline" of a held-out set (the strongest overlap rule): its
    name and accuracy; None for cards of before it."""
    baseline = held.get("baseline")
    if not isinstance(baseline, dict) or number(baseline.get("accuracy")) is None:
        return None
    name = baseline.get("name") or baseline.get("weighting") or "shared units"
    return str(name), float(baseline["accuracy"])


def show_one_sentence_figures(card: dict) -> None:
    """The card's held-out figures for the demo's own use pattern: a context of
    one sentence, beside the baseline (older cards: counting shared characters/words)."""
    short = card.get("held_out_one_sentence")
    if not isinstance(short, dict) or number(short.get("accuracy")) is None:
        return
    accuracy = float(short["accuracy"])
    baseline = strongest_baseline(short)
    if baseline is not None:
        name, figure = baseline
        st.sidebar.metric(
            "Held-out accuracy, one-sentence context",
            f"{accuracy:.1%}",
            f"{accuracy - figure:+.1%} vs the baseline",
        )
        details = [f"the baseline, the best rule of shared units ({name}): {figure:.1%}"]
        previous = short.get("previous_model")
        if isinstance(previous, dict) and number(previous.get("accuracy")) is not None:
            details.append(f"the model this one replaced: {previous['accuracy']:.1%}")
        st.sidebar.caption("On the same questions, " + "; ".join(details) + ".")
        return
    counted = number(short.get("overlap_count_baseline"))
    delta = f"{accuracy - counted:+.1%} vs counting shared units" if counted is not None else None
    st.sidebar.metric("Held-out accuracy, one-sentence context", f"{accuracy:.1%}", delta)
    details = []
    if counted is not None:
        details.append(f"counting the units an option shares with the context: {counted:.1%}")
    if number(short.get("overlap_idf_baseline")) is not None:
        details.append(f"weighted by rarity: {short['overlap_idf_baseline']:.1%}")
    previous = short.get("previous_model")
    if isinstance(previous, dict) and number(previous.get("accuracy")) is not None:
        details.append(f"the model this one replaced: {previous['accuracy']:.1%}")
    if details:
        st.sidebar.caption("On the same questions, " + "; ".join(details) + ".")


def show_training(card: dict) -> None:
    """How the demo models were made, from the card ``albert_tf.demo_models`` writes."""
    pre = card.get("pretraining") if isinstance(card.get("pretraining"), dict) else {}
    fine = card.get("finetuning") if isinstance(card.get("finetuning"), dict) else {}
    model = pre.get("model", {})
    shape = (
        f"E={model.get('embedding_size')}, H={model.get('hidden_size')}, "
        f"L={model.get('num_hidden_layers')}, sharing: {model.get('share')}."
    )
    if pre.get("encoder"):  # fine-tuned from a shipped pretrained encoder
        mlm = number(pre.get("mlm_accuracy"))
        st.sidebar.markdown(
            f"**Trained on:** {fine.get('items', 0):,} questions "
            f"({fine.get('seconds', 0) / 60:.0f} min on 2 CPU cores), starting from the "
            f"pretrained encoder `{pre['encoder']}` ({pre.get('steps') or 0:,} pretraining "
            "steps"
            + (f", held-out MLM accuracy {mlm:.1%}" if mlm is not None else "")
            + "). "
            + shape
        )
    elif pre:
        st.sidebar.markdown(
            f"**Trained on:** {', '.join(pre.get('corpora', []))}: {pre.get('documents', 0):,} "
            f"documents, {pre.get('sentences', 0):,} sentences; {pre.get('steps', 0):,} "
            f"pretraining steps ({pre.get('sentence_task', '').upper()} + MLM, "
            f"{pre.get('seconds', 0) / 60:.0f} min), then {fine.get('items', 0):,} "
            f"questions ({fine.get('seconds', 0) / 60:.0f} min) on 2 CPU cores. " + shape
        )


class MultipleChoicePage(TaskPage):
    title = "ALBERT multiple choice"
    caption = "Which option continues the context? A small ALBERT, trained here, answers."
    tasks = MULTIPLE_CHOICE_TASKS
    task_name = "multiple choice"
    how_to_get_one = (
        "The repository ships a demo model in `models/exported`: start the app from the "
        "repository root, or rebuild the demo models:"
    )
    command = "python -m albert_tf.demo_models   # about an hour per language on 2 CPU cores"
    key = "mc"
    fields = (
        Field("context", "Context", height=120),
        Field("question", "Question ('_' marks a blank the option fills; may be empty)"),
        Field("options", "Options (one per line)", height=140),
    )
    examples = EXAMPLES
    tokens_title = "How each option was tokenised"

    def validate(self, values: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        context = values["context"]
        options = [line.strip() for line in values["options"].splitlines() if line.strip()]
        if not options:
            raise ValueError("Enter at least one option, one per line.")
        if len(options) > MAX_OPTIONS:
            raise ValueError(
                f"{len(options)} options: this demo scores at most {MAX_OPTIONS} at a time. "
                "Remove some options, or score them in batches through the SavedModel."
            )
        notes = []
        if len(context) > MAX_CONTEXT_CHARS:
            notes.append(
                f"The context has {len(context):,} characters; only its first "
                f"{MAX_CONTEXT_CHARS:,} are sent (the model reads at most its max_seq_length "
                "pieces anyway)."
            )
            context = context[:MAX_CONTEXT_CHARS]
        if any(len(o) > MAX_OPTION_CHARS for o in options):
            notes.append(
                f"Options longer than {MAX_OPTION_CHARS} characters are cut to that length."
            )
            options = [o[:MAX_OPTION_CHARS] for o in options]
        return {"context": context, "question": values["question"], "options": options}, notes

    def inputs(self, values: dict[str, Any]) -> dict[str, tf.Tensor]:
        return {
            "context": tf.constant([values["context"]]),
            "question": tf.constant([values["question"]]),
            "options": tf.constant([values["options"]]),
        }

    def warm_up_values(self, values: dict[str, str]) -> list[dict[str, str]]:
        # The example, and 2 to 6 options: the counts visitors send.
        options = values["options"].splitlines()
        counts = (len(options), 2, 3, 5, 6)
        return [values | {"options": "\n".join((options * 2)[:n])} for n in counts]

    def show_card(self, answer: Answer) -> None:
        card = answer.card
        st.sidebar.markdown(f"**Task:** {card.get('task', '')}")
        held = card.get("held_out") if isinstance(card.get("held_out"), dict) else {}
        accuracy, chance = number(held.get("accuracy")), number(held.get("chance"))
        if accuracy is not None:
            delta = None
            if chance is not None:
                delta = f"{accuracy - chance:+.1%} vs chance {chance:.0%}"
            st.sidebar.metric("Held-out accuracy", f"{accuracy:.1%}", delta)
            details = []
            if number(held.get("accuracy_stderr")) is not None:
                details.append(f"± {held['accuracy_stderr']:.1%} (one standard error)")
            if number(held.get("items")) is not None:
                details.append(
                    f"on {held['items']:,.0f} next-sentence questions from documents it never saw"
                )
            baseline = strongest_baseline(held)
            if baseline is not None:
                details.append(f"the baseline ({baseline[0]}) scores {baseline[1]:.1%}")
            elif number(held.get("overlap_idf_baseline")) is not None:
                details.append(
                    "word/character overlap with the context scores "
                    f"{held['overlap_idf_baseline']:.1%}"
                )
            if details:
                st.sidebar.caption("; ".join(details) + ".")
        show_one_sentence_figures(card)
        show_training(card)
        st.sidebar.markdown(f"**Good at:** {card.get('good_at', '')}")
        st.sidebar.markdown(f"**Not good at:** {card.get('not_good_at', '')}")
        shared = card.get("shared_sets") if isinstance(card.get("shared_sets"), dict) else {}
        scores = [
            f"{k} {v['accuracy']:.1%} (chance {v['chance']:.0%})"
            for k, v in shared.items()
            if isinstance(v, dict)
            and number(v.get("accuracy")) is not None
            and number(v.get("chance")) is not None
        ]
        if scores:
            st.sidebar.caption("Untuned, on other tasks: " + "; ".join(scores))

    def show_result(self, answer: Answer, left: Any, right: Any) -> None:
        options = answer.values["options"]
        probabilities = answer.result["probabilities"][0]
        prediction = int(answer.result["prediction"][0])
        with left:
            st.success(f"**Answer:** {options[prediction]}  ({probabilities[prediction]:.1%})")
            chart = pd.DataFrame(
                {"probability": probabilities},
                index=[f"{i + 1}. {o[:40]}" for i, o in enumerate(options)],
            )
            st.bar_chart(chart, horizontal=True)
        with right:
            st.metric("Options", len(options))
        packed = answer.packed
        # An export that adds the overlap to the model's score returns both parts.
        parts = score_parts(answer.result, answer.meta)
        columns, how = parts if parts is not None else ({}, "")
        table = pd.DataFrame(
            {
                "option": options,
                "probability": [round(float(p), 4) for p in probabilities],
                **{k: [round(x, 4) for x in v[: len(options)]] for k, v in columns.items()},
                "pieces": [int(n) for n in packed["padding_mask"][0].sum(-1)],
                "context truncated": packed["context_truncated"][0].tolist(),
                "question+option truncated": packed["qa_truncated"][0].tolist(),
            }
        )
        st.dataframe(table, hide_index=True)
        if how:
            st.caption(how)

    def token_rows(self, answer: Answer) -> list[tuple[str | None, list[str]]]:
        pieces, mask = answer.packed["pieces"][0], answer.packed["padding_mask"][0] > 0
        return [
            (f"{i + 1}. {option}", [p.decode("utf-8", "replace") for p in pieces[i][mask[i]]])
            for i, option in enumerate(answer.values["options"])
        ]


MultipleChoicePage().run()
