"""Interactive multiple choice with exported ALBERT SavedModels, Chinese and English.

    streamlit run apps/multiple_choice.py

Models are SavedModels written by ``python -m albert_tf.export`` (or
``albert_tf.finetune --export_dir``, or ``albert_tf.demo_models``) under a models
folder fixed when the app starts, default ``models/exported`` (``-- --models_dir=PATH``
or ``ALBERT_MODELS_DIR`` overrides it; visitors cannot change it), each as
``NAME/<version>/``. The repository ships the demo models there, ``albert_demo_zh`` and
``albert_demo_en``; ``python -m albert_tf.demo_models`` rebuilds them.
By default the page answers with the model whose language matches the text (by
script), says which model answered, and shows that model's card
(``assets.extra/model_card.json``). Inference goes through the SavedModel's
``serving_default`` signature; ``tokenize`` shows how each option was packed. Only
tensorflow and tensorflow_text are needed here. The page lists multiple-choice models
only; text classifiers are on the classification page (``pages/classification.py``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import streamlit as st
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

# Streamlit runs a page as a script, not as a module of a package. `streamlit run`
# puts this folder on sys.path but AppTest.from_file does not: add it so that the
# shared helpers import the same way under both.
APPS_DIR = str(Path(__file__).resolve().parent)
if APPS_DIR not in sys.path:  # the script reruns on every interaction
    sys.path.insert(0, APPS_DIR)
from exported_models import (  # noqa: E402
    AUTOMATIC,
    LANGUAGE_NAMES,
    MULTIPLE_CHOICE_TASKS,
    UNK_WARNING_SHARE,
    choose_model,
    detect_language,
    find_models,
    model_info,
    models_dir,
    unknown_share,
)

REBUILD_COMMAND = "python -m albert_tf.demo_models   # about an hour per language on 2 CPU cores"
# Larger inputs get a message instead of a long wait: the model reads at most
# max_seq_length pieces per option anyway.
MAX_OPTIONS = 20
MAX_CONTEXT_CHARS = 2000
MAX_OPTION_CHARS = 500

EXAMPLES = {
    "中文": {
        "context": "算法组的成员们精通各种AI算法.",
        "question": "",
        "options": [
            "成都动物园里的大熊猫人人都想摸一下.",
            "他们主要负责AI算法的研究和落地.",
            "我没吃上吉士果.",
            "你吃饭了吗?",
        ],
    },
    "English": {
        "context": (
            "The President told Congress that the nation's farms had suffered a hard year. "
            "Drought had ruined the harvest across the western states."
        ),
        "question": "",
        "options": [
            "Elizabeth laughed and said she would not dance with him again.",
            "He asked for relief for the farmers who had lost their crops.",
            "And the LORD spake unto Moses, saying,",
            "The committee adjourned until the following morning.",
        ],
    },
}


@st.cache_resource(show_spinner="Loading the SavedModel…")
def load_saved_model(path: str):
    """Loaded and warmed once per path and process; every rerun reuses it."""
    model = tf.saved_model.load(path)
    meta, _ = model_info(Path(path))
    example = EXAMPLES["中文" if meta.get("language") == "zh" else "English"]
    # Kernels are built per input shape on first use; warm up with the shapes a
    # visitor sends (the example, and 2 to 6 options) so the latency shown is a
    # warm model's.
    for count in (len(example["options"]), 2, 3, 5, 6):
        options = (example["options"] * 2)[:count]
        inputs = {
            "context": tf.constant([example["context"]]),
            "question": tf.constant([example["question"]]),
            "options": tf.constant([options]),
        }
        model.signatures["serving_default"](**inputs)
        model.signatures["tokenize"](**inputs)
    return model


def set_example() -> None:
    example = EXAMPLES[st.session_state.example]
    st.session_state.context = example["context"]
    st.session_state.question = example["question"]
    st.session_state.options = "\n".join(example["options"])


def _number(value) -> float | None:
    """A card value as a float, or None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def show_one_sentence_figures(card: dict) -> None:
    """The card's held-out figures for the demo's own use pattern: a context of
    one sentence, beside what counting shared characters/words scores."""
    short = card.get("held_out_one_sentence")
    if not isinstance(short, dict) or _number(short.get("accuracy")) is None:
        return
    accuracy = float(short["accuracy"])
    counted = _number(short.get("overlap_count_baseline"))
    delta = f"{accuracy - counted:+.1%} vs counting shared units" if counted is not None else None
    st.sidebar.metric("Held-out accuracy, one-sentence context", f"{accuracy:.1%}", delta)
    details = []
    if counted is not None:
        details.append(f"counting the units an option shares with the context: {counted:.1%}")
    if _number(short.get("overlap_idf_baseline")) is not None:
        details.append(f"weighted by rarity: {short['overlap_idf_baseline']:.1%}")
    previous = short.get("previous_model")
    if isinstance(previous, dict) and _number(previous.get("accuracy")) is not None:
        details.append(f"the model this one replaced: {previous['accuracy']:.1%}")
    if details:
        st.sidebar.caption("On the same questions, " + "; ".join(details) + ".")


def show_model_card(name: str, meta: dict, card: dict) -> None:
    st.sidebar.subheader("Model card")
    st.sidebar.markdown(f"**{name}** · language: {meta.get('language', '?')}")
    if not card:
        st.sidebar.caption(
            f"tokenizer: {meta.get('tokenizer')} · max_seq_length {meta.get('max_seq_length')} "
            "· no model card was exported with this model"
        )
        return
    st.sidebar.markdown(f"**Task:** {card.get('task', '')}")
    # Cards are written by people and other tools too: every key is optional.
    held = card.get("held_out") if isinstance(card.get("held_out"), dict) else {}
    accuracy, chance = _number(held.get("accuracy")), _number(held.get("chance"))
    if accuracy is not None:
        delta = f"{accuracy - chance:+.1%} vs chance {chance:.0%}" if chance is not None else None
        st.sidebar.metric("Held-out accuracy", f"{accuracy:.1%}", delta)
        details = []
        if _number(held.get("accuracy_stderr")) is not None:
            details.append(f"± {held['accuracy_stderr']:.1%} (one standard error)")
        if _number(held.get("items")) is not None:
            details.append(
                f"on {held['items']:,.0f} next-sentence questions from documents it never saw"
            )
        if _number(held.get("overlap_idf_baseline")) is not None:
            details.append(
                f"word/character overlap with the context scores {held['overlap_idf_baseline']:.1%}"
            )
        if details:
            st.sidebar.caption("; ".join(details) + ".")
    show_one_sentence_figures(card)
    pre, fine = card.get("pretraining", {}), card.get("finetuning", {})
    if pre.get("encoder"):  # fine-tuned from a shipped pretrained encoder
        model = pre.get("model", {})
        mlm = _number(pre.get("mlm_accuracy"))
        st.sidebar.markdown(
            f"**Trained on:** {fine.get('items', 0):,} questions "
            f"({fine.get('seconds', 0) / 60:.0f} min on 2 CPU cores), starting from the "
            f"pretrained encoder `{pre['encoder']}` ({pre.get('steps') or 0:,} pretraining "
            "steps" + (f", held-out MLM accuracy {mlm:.1%}" if mlm is not None else "") + "). "
            f"E={model.get('embedding_size')}, H={model.get('hidden_size')}, "
            f"L={model.get('num_hidden_layers')}, sharing: {model.get('share')}."
        )
    elif pre:
        model = pre.get("model", {})
        st.sidebar.markdown(
            f"**Trained on:** {', '.join(pre.get('corpora', []))}: {pre.get('documents', 0):,} "
            f"documents, {pre.get('sentences', 0):,} sentences; {pre.get('steps', 0):,} "
            f"pretraining steps ({pre.get('sentence_task', '').upper()} + MLM, "
            f"{pre.get('seconds', 0) / 60:.0f} min), then {fine.get('items', 0):,} "
            f"questions ({fine.get('seconds', 0) / 60:.0f} min) on 2 CPU cores. "
            f"E={model.get('embedding_size')}, H={model.get('hidden_size')}, "
            f"L={model.get('num_hidden_layers')}, sharing: {model.get('share')}."
        )
    st.sidebar.markdown(f"**Good at:** {card.get('good_at', '')}")
    st.sidebar.markdown(f"**Not good at:** {card.get('not_good_at', '')}")
    shared = card.get("shared_sets") if isinstance(card.get("shared_sets"), dict) else {}
    scores = [
        f"{k} {v['accuracy']:.1%} (chance {v['chance']:.0%})"
        for k, v in shared.items()
        if isinstance(v, dict)
        and _number(v.get("accuracy")) is not None
        and _number(v.get("chance")) is not None
    ]
    if scores:
        st.sidebar.caption("Untuned, on other tasks: " + "; ".join(scores))


def validate(context: str, options: list[str]) -> tuple[str, list[str], list[str]]:
    """Cuts hostile input down to what the model can use; returns it and the notes.

    Raises ValueError with the message to show when there is nothing sensible to do.
    """
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
        notes.append(f"Options longer than {MAX_OPTION_CHARS} characters are cut to that length.")
        options = [o[:MAX_OPTION_CHARS] for o in options]
    return context, options, notes


def main() -> None:
    st.set_page_config(page_title="ALBERT multiple choice", layout="wide")
    st.title("ALBERT multiple choice")
    st.caption("Which option continues the context? A small ALBERT, trained here, answers.")

    folder = models_dir()
    # Read-only: set when the app starts (apps/README.md, "Serving the demo to others").
    st.sidebar.caption(f"Models folder: `{folder}`")
    models = find_models(folder, MULTIPLE_CHOICE_TASKS)
    if not models:
        st.error(
            f"No exported model found in `{folder}` for multiple choice. The "
            "repository ships a demo model in `models/exported`: start the app from the "
            "repository root, or rebuild the demo models:"
        )
        st.code(REBUILD_COMMAND, language="bash")
        st.info(
            "Or export your own fine-tuned checkpoint: `python -m albert_tf.export "
            f"--checkpoint=runs/mc/best --export_dir={folder}/NAME`"
        )
        st.stop()
    choice = st.sidebar.selectbox("Model", [AUTOMATIC, *models])

    if "context" not in st.session_state:
        st.session_state.example = "中文"
        set_example()
    st.radio("Example", list(EXAMPLES), key="example", horizontal=True, on_change=set_example)
    context = st.text_area("Context", key="context", height=120)
    question = st.text_input(
        "Question ('_' marks a blank the option fills; may be empty)", key="question"
    )
    options_text = st.text_area("Options (one per line)", key="options", height=140)
    options = [line.strip() for line in options_text.splitlines() if line.strip()]
    try:
        context, options, notes = validate(context, options)
    except ValueError as err:
        st.warning(str(err))
        st.stop()
    for note in notes:
        st.info(note)

    language = detect_language(" ".join([context, question, *options]))
    name, reason = choose_model(models, choice, language)
    meta, card = model_info(models[name])
    show_model_card(name, meta, card)
    model = load_saved_model(str(models[name]))

    inputs = {
        "context": tf.constant([context]),
        "question": tf.constant([question]),
        "options": tf.constant([options]),
    }
    serve = model.signatures["serving_default"]
    start = time.perf_counter()
    result = serve(**inputs)
    latency_ms = 1000 * (time.perf_counter() - start)
    probabilities = result["probabilities"].numpy()[0]
    prediction = int(result["prediction"].numpy()[0])

    packed = model.signatures["tokenize"](**inputs)
    pieces = packed["pieces"].numpy()[0]
    mask = packed["padding_mask"].numpy()[0]
    lengths = mask.sum(-1)
    words = [
        p.decode("utf-8", "replace")
        for row, n in zip(pieces, lengths, strict=True)
        for p in row[:n]
    ]
    unknown = unknown_share(words)

    st.caption(
        f"Answered by **{name}** ({LANGUAGE_NAMES.get(meta.get('language'), '?')}): {reason}."
    )
    if unknown > UNK_WARNING_SHARE:
        st.warning(
            f"{unknown:.0%} of the input's pieces are unknown to this model's vocabulary "
            f"([UNK]); its answer means little. Is the text in "
            f"{LANGUAGE_NAMES.get(meta.get('language'), 'its language')}?"
        )

    left, right = st.columns([3, 1])
    with left:
        st.success(f"**Answer:** {options[prediction]}  ({probabilities[prediction]:.1%})")
        chart = pd.DataFrame(
            {"probability": probabilities},
            index=[f"{i + 1}. {o[:40]}" for i, o in enumerate(options)],
        )
        st.bar_chart(chart, horizontal=True)
    with right:
        st.metric("Latency (serving_default, warm)", f"{latency_ms:.1f} ms")
        st.metric("Options", len(options))

    table = pd.DataFrame(
        {
            "option": options,
            "probability": [round(float(p), 4) for p in probabilities],
            "pieces": [int(n) for n in lengths],
            "context truncated": packed["context_truncated"].numpy()[0].tolist(),
            "question+option truncated": packed["qa_truncated"].numpy()[0].tolist(),
        }
    )
    st.dataframe(table, hide_index=True)
    with st.expander("How each option was tokenised", expanded=False):
        for i, option in enumerate(options):
            tokens = [p.decode("utf-8", "replace") for p in pieces[i][: lengths[i]]]
            st.markdown(f"**{i + 1}. {option}** — {len(tokens)} pieces")
            st.code(" ".join(tokens), language=None)


main()
