"""Interactive multiple choice with an exported ALBERT SavedModel.

    streamlit run apps/multiple_choice.py

Models are SavedModels written by ``python -m albert_tf.export`` (or
``albert_tf.finetune --export_dir``) under a models folder, default
``models/exported`` (``ALBERT_MODELS_DIR`` overrides it), each as
``NAME/<version>/``. Inference goes through the SavedModel's
``serving_default`` signature; the ``tokenize`` signature shows how each
option was packed. Only tensorflow and tensorflow_text are needed here.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import streamlit as st
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

DEFAULT_MODELS_DIR = os.environ.get("ALBERT_MODELS_DIR", "models/exported")
QUICKSTART_NAME = "albert_mc_quickstart"
QUICKSTART_COMMANDS = """\
python -m albert_tf.train_tokenizer --kind=sentencepiece \\
    --input=albert_tf/data/sample/en_sample.jsonl --output_dir=runs/tokenizer_en --vocab_size=2000
python -m albert_tf.finetune --flagfile=configs/finetune_quickstart.flags"""

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
        "context": "It had been raining all morning, and the streets were full of puddles.",
        "question": "Before going out, Anna took her _ .",
        "options": ["umbrella", "sunglasses", "ice cream", "swimming costume"],
    },
}


def find_models(root: str) -> dict[str, Path]:
    """``{"NAME (version N)": path}`` for the newest version of each SavedModel."""
    base = Path(root)
    if (base / "saved_model.pb").is_file():
        return {f"{base.parent.name} (version {base.name})": base}
    found = {}
    candidates = [base] + (sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else [])
    for name_dir in candidates:
        versions = (
            [p for p in name_dir.iterdir() if p.name.isdigit() and (p / "saved_model.pb").is_file()]
            if name_dir.is_dir()
            else []
        )
        if versions:
            newest = max(versions, key=lambda p: int(p.name))
            found[f"{name_dir.name} (version {newest.name})"] = newest
    return found


@st.cache_resource(show_spinner="Loading the SavedModel…")
def load_saved_model(path: str):
    """Loaded once per path and process; every rerun reuses it."""
    model = tf.saved_model.load(path)
    # The first call of a loaded signature builds its kernels (seconds); do it
    # here so the latency shown is that of a warm model.
    warm = {"context": tf.constant(["a"]), "question": tf.constant([""])}
    model.signatures["serving_default"](options=tf.constant([["b", "c"]]), **warm)
    model.signatures["tokenize"](options=tf.constant([["b", "c"]]), **warm)
    meta_file = Path(path) / "assets.extra" / "albert_tf.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.is_file() else {}
    return model, meta


def set_example() -> None:
    example = EXAMPLES[st.session_state.example]
    st.session_state.context = example["context"]
    st.session_state.question = example["question"]
    st.session_state.options = "\n".join(example["options"])


def main() -> None:
    st.set_page_config(page_title="ALBERT multiple choice", layout="wide")
    st.title("ALBERT multiple choice")

    models_dir = st.sidebar.text_input("Models folder", DEFAULT_MODELS_DIR)
    models = find_models(models_dir)
    if not models:
        st.error(
            f"No exported model found in `{models_dir}`. Run the quick start from the "
            "repository root to create one, then reload this page:"
        )
        st.code(QUICKSTART_COMMANDS, language="bash")
        st.info(
            "Or export your own fine-tuned checkpoint: `python -m albert_tf.export "
            f"--checkpoint=runs/mc/best --export_dir={models_dir}/NAME`"
        )
        st.stop()
    names = list(models)
    default = next((i for i, n in enumerate(names) if n.startswith(QUICKSTART_NAME)), 0)
    choice = st.sidebar.selectbox("Model", names, index=default)
    model, meta = load_saved_model(str(models[choice]))
    if meta:
        st.sidebar.caption(
            f"tokenizer: {meta.get('tokenizer')} · language: {meta.get('language')} · "
            f"max_seq_length {meta.get('max_seq_length')} · max_qa_length "
            f"{meta.get('max_qa_length')}"
        )

    if "context" not in st.session_state:
        st.session_state.example = "中文"
        set_example()
    st.radio("Example", list(EXAMPLES), key="example", horizontal=True, on_change=set_example)
    context = st.text_area("Context", key="context", height=120)
    question = st.text_input(
        "Question ('_' marks a blank the option fills; may be empty)", key="question"
    )
    options_text = st.text_area("Options (one per line, any number)", key="options", height=140)
    options = [line.strip() for line in options_text.splitlines() if line.strip()]
    if not options:
        st.warning("Enter at least one option.")
        st.stop()

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
    lengths = packed["padding_mask"].numpy()[0].sum(-1)

    left, right = st.columns([3, 1])
    with left:
        st.success(f"**Answer:** {options[prediction]}  ({probabilities[prediction]:.1%})")
        chart = pd.DataFrame(
            {"probability": probabilities},
            index=[f"{i + 1}. {o[:40]}" for i, o in enumerate(options)],
        )
        st.bar_chart(chart, horizontal=True)
    with right:
        st.metric("Latency (serving_default)", f"{latency_ms:.1f} ms")
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
