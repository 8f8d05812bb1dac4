"""Interactive text classification with exported ALBERT SavedModels, Chinese and English.

    streamlit run apps/multiple_choice.py     # then "classification" in the sidebar

Models are raw-text SavedModels written by ``albert_tf.finetune --task=classification
--export_dir`` (or ``python -m albert_tf.export`` on a fine-tuned classifier) under
the models folder the multiple-choice page uses, default ``models/exported``
(``-- --models_dir=PATH`` or ``ALBERT_MODELS_DIR`` overrides it when the app starts),
each as ``NAME/<version>/``. Only exports whose
``assets.extra/albert_tf.json`` says ``"task": "classification"`` are listed. By
default the page answers with the model whose language matches the text (by script),
says which model answered and why, and shows the model's card
(``assets.extra/model_card.json``) when it has one. It shows each label's probability
(or the score of a regression model), the warm latency and the tokenisation, through
the SavedModel's ``serving_default`` and ``tokenize`` signatures. Only tensorflow and
tensorflow_text are needed here.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import streamlit as st
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

# Streamlit runs a page as a script, not as a module of a package. `streamlit run
# apps/multiple_choice.py` puts apps/ on sys.path but AppTest.from_file does not: add it
# so that the shared helpers import the same way under both.
APPS_DIR = str(Path(__file__).resolve().parents[1])
if APPS_DIR not in sys.path:  # the script reruns on every interaction
    sys.path.insert(0, APPS_DIR)
from exported_models import (  # noqa: E402
    AUTOMATIC,
    CLASSIFICATION_TASKS,
    LANGUAGE_NAMES,
    UNK_WARNING_SHARE,
    choose_model,
    detect_language,
    find_models,
    model_info,
    models_dir,
    unknown_share,
)

TRAIN_COMMAND = (
    "python -m albert_tf.finetune --flagfile=configs/classify_zh_reviews.flags"
    "   # about 17 minutes on 2 CPU cores"
)
# Longer input is cut, with a note, instead of making the visitor wait: the model
# reads at most max_seq_length pieces of text and pair together anyway (the
# SavedModel itself refuses rows over 100,000 characters).
MAX_TEXT_CHARS = 2000
MAX_PAIR_CHARS = 2000

EXAMPLES = {
    "中文": {"text": "这个手机用了一个月，电池很耐用，屏幕也清楚，推荐购买。", "text_pair": ""},
    "English": {
        "text": "The battery lasts two days and the screen is sharp. I would buy this phone again.",
        "text_pair": "",
    },
}


@st.cache_resource(show_spinner="Loading the SavedModel…")
def load_saved_model(path: str):
    """Loaded and warmed once per path and process; every rerun reuses it."""
    model = tf.saved_model.load(path)
    meta, _ = model_info(Path(path))
    text = EXAMPLES["中文" if meta.get("language") == "zh" else "English"]["text"]
    # Kernels are built per input shape on first use; warm up with the lengths a
    # visitor sends (a short text, the example, a pair, a text filling max_seq_length)
    # so that the latency shown is a warm model's.
    for sample, pair in ((text[:8], ""), (text, ""), (text, text), (text * 40, "")):
        inputs = {"text": tf.constant([sample]), "text_pair": tf.constant([pair])}
        model.signatures["serving_default"](**inputs)
        model.signatures["tokenize"](**inputs)
    return model


def set_example() -> None:
    example = EXAMPLES[st.session_state.clf_example]
    st.session_state.clf_text = example["text"]
    st.session_state.clf_pair = example["text_pair"]


def validate(text: str, pair: str) -> tuple[str, str, list[str]]:
    """Cuts hostile input down to what the model can use; returns it and the notes.

    Raises ValueError with the message to show when there is nothing to classify.
    """
    if not text.strip():
        raise ValueError("Enter a text to classify (the second text is optional).")
    notes = []
    for what, value, limit in (
        ("text", text, MAX_TEXT_CHARS),
        ("second text", pair, MAX_PAIR_CHARS),
    ):
        if len(value) > limit:
            notes.append(
                f"The {what} has {len(value):,} characters; only its first {limit:,} are sent "
                "(the model reads at most its max_seq_length pieces anyway)."
            )
    return text[:MAX_TEXT_CHARS], pair[:MAX_PAIR_CHARS], notes


def _number(value: object) -> float | None:
    """A card value as a float, or None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _describe(value: object) -> str:
    """A card entry on one line, whatever its shape (text, number, list or mapping)."""
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_describe(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_describe(v) for v in value)
    if _number(value) is not None:
        return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"
    return str(value)


def _references(held: dict) -> dict[str, float]:
    """What the card compares the model with: chance, the majority class, baselines."""
    found = {}
    for key, value in held.items():
        reference = key in ("chance", "majority", "majority_class") or "baseline" in key
        if reference and _number(value) is not None:
            name = "majority class" if key.startswith("majority") else key.replace("_", " ")
            found[name] = float(value)
    baselines = held.get("baselines")
    if isinstance(baselines, dict):
        found |= {str(k): float(v) for k, v in baselines.items() if _number(v) is not None}
    return found


def show_model_card(name: str, meta: dict, card: dict, labels: list[str] | None) -> None:
    """The sidebar card. Cards have no fixed schema: every key is optional."""
    st.sidebar.subheader("Model card")
    kind = f"labels: {', '.join(labels)}" if labels else "regression: one score"
    st.sidebar.markdown(f"**{name}** · language: {meta.get('language', '?')} · {kind}")
    if not card:
        st.sidebar.caption(
            f"tokenizer: {meta.get('tokenizer')} · max_seq_length {meta.get('max_seq_length')} "
            "· no model card was exported with this model"
        )
        return
    if card.get("task"):
        st.sidebar.markdown(f"**Task:** {_describe(card['task'])}")
    trained_on = next(
        (card[k] for k in ("trained_on", "data", "dataset", "training_data") if card.get(k)), None
    )
    if trained_on is not None:
        st.sidebar.markdown(f"**Trained on:** {_describe(trained_on)}")
    for key, title in (("pretraining", "Pretraining"), ("finetuning", "Fine-tuning")):
        if card.get(key):
            st.sidebar.caption(f"{title}: {_describe(card[key])}")

    held = card.get("held_out") if isinstance(card.get("held_out"), dict) else {}
    accuracy = _number(held.get("accuracy"))
    references = _references(held)
    if accuracy is not None:
        # Against the strongest simple reference: beating chance alone says little.
        delta = None
        if references:
            ref_name, ref = max(references.items(), key=lambda item: item[1])
            delta = f"{accuracy - ref:+.1%} vs {ref_name} {ref:.1%}"
        st.sidebar.metric("Held-out accuracy", f"{accuracy:.1%}", delta)
    for key, title in (("pearson", "Held-out Pearson r"), ("spearman", "Held-out Spearman ρ")):
        if _number(held.get(key)) is not None:
            st.sidebar.metric(title, f"{held[key]:.3f}")
    details = []
    stderr, items = _number(held.get("accuracy_stderr")), _number(held.get("items"))
    if stderr is not None:
        details.append(f"± {stderr:.1%} (one standard error)")
    if items is not None:
        details.append(f"on {items:,.0f} held-out items")
    if references:
        details.append("; ".join(f"{k} {v:.1%}" for k, v in references.items()))
    for key in ("macro_f1", "mcc"):
        if _number(held.get(key)) is not None:
            details.append(f"{key.replace('_', ' ')} {held[key]:.3f}")
    if details:
        st.sidebar.caption(" · ".join(details))
    for key, title in (("good_at", "Good at"), ("not_good_at", "Not good at")):
        if card.get(key):
            st.sidebar.markdown(f"**{title}:** {_describe(card[key])}")


def label_names(meta: dict, count: int) -> list[str]:
    """The export's label names, or numbered labels when they are missing or do not fit."""
    names = meta.get("label_names")
    if isinstance(names, list) and len(names) == count:
        return [str(n) for n in names]
    return [f"label {i}" for i in range(count)]


def main() -> None:
    st.set_page_config(page_title="ALBERT text classification", layout="wide")
    st.title("ALBERT text classification")
    st.caption("Which label fits a text, or a pair of texts? A small fine-tuned ALBERT answers.")

    folder = models_dir()
    # Read-only: set when the app starts (apps/README.md, "Serving the demo to others").
    st.sidebar.caption(f"Models folder: `{folder}`")
    models = find_models(folder, CLASSIFICATION_TASKS)
    if not models:
        st.error(
            f"No exported model found in `{folder}` for text classification. Fine-tune "
            "and export one (the Chinese product-review sentiment recipe exports to "
            "`models/exported/albert_reviews_zh`):"
        )
        st.code(TRAIN_COMMAND, language="bash")
        st.info(
            "Or export a fine-tuned classifier: `python -m albert_tf.export "
            f"--checkpoint=runs/NAME/best --export_dir={folder}/NAME`"
        )
        st.stop()
    choice = st.sidebar.selectbox("Model", [AUTOMATIC, *models])

    # Keys apart from the multiple-choice page's: pages share st.session_state.
    if "clf_text" not in st.session_state:
        st.session_state.clf_example = "中文"
        set_example()
    st.radio("Example", list(EXAMPLES), key="clf_example", horizontal=True, on_change=set_example)
    text = st.text_area("Text", key="clf_text", height=120)
    pair = st.text_area(
        "Second text (optional: for tasks on pairs, e.g. a premise and a hypothesis)",
        key="clf_pair",
        height=80,
    )
    try:
        text, pair, notes = validate(text, pair)
    except ValueError as err:
        st.warning(str(err))
        st.stop()
    for note in notes:
        st.info(note)

    language = detect_language(f"{text} {pair}")
    name, reason = choose_model(models, choice, language)
    meta, card = model_info(models[name])
    model = load_saved_model(str(models[name]))
    serve = model.signatures["serving_default"]
    regression = "score" in serve.structured_outputs
    inputs = {"text": tf.constant([text]), "text_pair": tf.constant([pair])}
    start = time.perf_counter()
    result = serve(**inputs)
    latency_ms = 1000 * (time.perf_counter() - start)
    packed = model.signatures["tokenize"](**inputs)
    length = int(packed["padding_mask"].numpy()[0].sum())
    pieces = [p.decode("utf-8", "replace") for p in packed["pieces"].numpy()[0][:length]]
    segments = packed["segment_ids"].numpy()[0][:length].tolist()
    max_seq_length = meta.get("max_seq_length")

    if regression:
        labels = None
    else:
        probabilities = result["probabilities"].numpy()[0]
        prediction = int(result["prediction"].numpy()[0])
        labels = label_names(meta, len(probabilities))
    show_model_card(name, meta, card, labels)

    language_name = LANGUAGE_NAMES.get(meta.get("language"), "?")
    st.caption(f"Answered by **{name}** ({language_name}): {reason}.")
    unknown = unknown_share(pieces)
    if unknown > UNK_WARNING_SHARE:
        st.warning(
            f"{unknown:.0%} of the input's pieces are unknown to this model's vocabulary "
            f"([UNK]); its answer means little. Is the text in "
            f"{LANGUAGE_NAMES.get(meta.get('language'), 'its language')}?"
        )
    if length == max_seq_length:
        st.info(
            f"The input fills the model's max_seq_length ({max_seq_length} pieces): the "
            "pieces past it were not read (the longer of text and second text loses its "
            "end first)."
        )

    left, right = st.columns([3, 1])
    with left:
        if regression:
            score = float(result["score"].numpy()[0])
            st.success(f"**Score:** {score:.4f}  (a regression model: one number, no labels)")
            table = pd.DataFrame({"score": [score], "pieces": [length]})
        else:
            st.success(f"**Label:** {labels[prediction]}  ({probabilities[prediction]:.1%})")
            table = pd.DataFrame(
                {"label": labels, "probability": [float(p) for p in probabilities]}
            )
            st.bar_chart(table.set_index("label"), horizontal=True)
    with right:
        st.metric("Latency (serving_default, warm)", f"{latency_ms:.1f} ms")
        st.metric("Pieces", f"{length} of {max_seq_length}")
    st.dataframe(
        table,
        hide_index=True,
        column_config={
            "probability": st.column_config.ProgressColumn(
                "probability", format="%.4f", min_value=0.0, max_value=1.0
            ),
        },
    )
    with st.expander("How the input was tokenised", expanded=False):
        st.markdown(f"{length} pieces; segment 0 is the text, segment 1 the second text.")
        for segment, title in ((0, "Text"), (1, "Second text")):
            tokens = [p for p, s in zip(pieces, segments, strict=True) if s == segment]
            if tokens:
                st.markdown(f"**{title}** — {len(tokens)} pieces")
                st.code(" ".join(tokens), language=None)


main()
