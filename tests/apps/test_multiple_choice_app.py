"""The multiple-choice page, driven by Streamlit's AppTest and by a real headless
Chromium against `streamlit run apps/app.py` (skipped when chromium is not installed)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers.app_browser import CHROMIUM, SKIP_REASON, app_in_chromium, screenshot_dir
from helpers.paths import REPO

APPS = REPO / "apps"
APP = APPS / "app.py"
PAGE = APPS / "task_pages" / "multiple_choice.py"
PAGES = sorted((APPS / "task_pages").glob("*.py"))


@pytest.fixture()
def app(mc_models, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(mc_models["zh"]["export"].parent))
    return AppTest.from_file(str(PAGE), default_timeout=180)


def _served(saved_model: Path, context: str, question: str, options: list[str]) -> np.ndarray:
    model = tf.saved_model.load(str(saved_model))
    out = model.signatures["serving_default"](
        context=tf.constant([context]),
        question=tf.constant([question]),
        options=tf.constant([options]),
    )
    return out["probabilities"].numpy()[0]


def _caption_texts(app) -> str:
    return "\n".join(c.value for c in app.caption)


def test_app_answers_chinese_then_edited_english(app, mc_models):
    app.run()
    assert not app.exception, app.exception
    # The seeds' Chinese example is shown by default, answered by the Chinese model
    # (automatic choice by script), whose card is in the sidebar.
    table = app.dataframe[0].value
    assert table["option"].tolist()[1] == "他们主要负责AI算法的研究和落地."
    assert abs(table["probability"].sum() - 1) < 1e-3
    assert "Answer:" in app.success[0].value
    assert "Answered by **tiny_zh (version 1)**" in _caption_texts(app)
    assert "the text is Chinese" in _caption_texts(app)
    assert any(m.label.startswith("Latency") for m in app.metric)
    assert app.sidebar.metric[0].label == "Held-out accuracy"
    assert app.sidebar.metric[0].value == "31.0%"
    # How the demo is used, one sentence of context, beside counting shared characters.
    short = app.sidebar.metric[1]
    assert (short.label, short.value) == ("Held-out accuracy, one-sentence context", "29.0%")
    assert short.delta == "+2.0% vs counting shared units"
    sidebar_captions = "\n".join(c.value for c in app.sidebar.caption)
    assert "weighted by rarity: 28.0%; the model this one replaced: 26.0%" in sidebar_captions

    # The English example is answered by the English model, without a sidebar choice.
    app.radio[0].set_value("English").run()
    assert "Answered by **tiny_en (version 1)**" in _caption_texts(app)
    assert "no model card was exported" in _caption_texts(app) + "\n".join(
        c.value for c in app.sidebar.caption
    )
    options = ["red", "blue", ("a very long option " * 20).strip()]
    app.text_area[0].input("The sky on a clear day is blue.")
    app.text_input[0].input("The sky is _ .")
    app.text_area[1].input("\n".join(options)).run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    assert table["option"].tolist() == options
    expected = _served(
        mc_models["en"]["saved_model"], "The sky on a clear day is blue.", "The sky is _ .", options
    )
    np.testing.assert_allclose(table["probability"].to_numpy(), expected, atol=1e-4)
    best = options[int(np.argmax(expected))]
    assert f"**Answer:** {best}" in app.success[0].value
    # The long option's question+option exceeds max_qa_length (32) and is cut.
    assert table["question+option truncated"].tolist() == [False, False, True]


def test_app_warns_when_the_chosen_model_does_not_know_the_script(app):
    app.run()
    # Chinese text, but the English model chosen by hand: its SentencePiece
    # vocabulary turns the Chinese characters into <unk>.
    app.sidebar.selectbox[0].set_value(
        next(o for o in app.sidebar.selectbox[0].options if o.startswith("tiny_en"))
    ).run()
    assert not app.exception, app.exception
    assert "chosen in the sidebar" in _caption_texts(app)
    assert any("unknown to this model's vocabulary" in w.value for w in app.warning)


@pytest.mark.parametrize(
    ("context", "options", "message"),
    [
        ("A context.", [f"option {i}" for i in range(100)], "100 options"),
        ("A context.", [], "Enter at least one option"),
    ],
)
def test_app_refuses_hostile_input_with_a_message(app, context, options, message):
    app.run()
    start = time.perf_counter()
    app.text_area[0].input(context)
    app.text_area[1].input("\n".join(options)).run()
    assert not app.exception, app.exception
    assert any(message in w.value for w in app.warning), [w.value for w in app.warning]
    assert not app.success  # no answer from half-valid input
    assert time.perf_counter() - start < 30


def test_app_cuts_a_huge_context_and_still_answers(app):
    app.run()
    app.text_area[0].input("他们主要负责算法。" * 5600).run()  # 50,400 characters
    assert not app.exception, app.exception
    assert any("50,400 characters" in i.value for i in app.info), [i.value for i in app.info]
    assert "Answer:" in app.success[0].value


def test_a_folder_with_only_an_english_model_opens_on_the_english_example(
    mc_models, tmp_path, monkeypatch
):
    from streamlit.testing.v1 import AppTest

    # The Chinese example would go to the English model, whose vocabulary knows none
    # of its characters: the page offers, and opens on, the English example alone.
    (tmp_path / "tiny_en").symlink_to(mc_models["en"]["export"], target_is_directory=True)
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path))
    app = AppTest.from_file(str(PAGE), default_timeout=180).run()
    assert not app.exception, app.exception
    assert app.radio[0].options == ["English"] and app.radio[0].value == "English"
    assert app.text_area[1].value.splitlines()[1] == (
        "He asked for relief for the farmers who had lost their crops."
    )
    assert "Answered by **tiny_en (version 1)**" in _caption_texts(app)
    assert "the text is English" in _caption_texts(app)
    assert "**Answer:**" in app.success[0].value
    assert not [w.value for w in app.warning if "[UNK]" in w.value]


def test_a_model_of_a_language_without_an_example_gets_typed_text(mc_models, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    # A model whose export says it reads French: no example fits it, so none is
    # offered, the page says why, and what the visitor types is answered.
    export = tmp_path / "tiny_fr" / "1"
    shutil.copytree(mc_models["en"]["saved_model"], export)
    meta_file = export / "assets.extra" / "albert_tf.json"
    meta_file.write_text(json.dumps(json.loads(meta_file.read_text()) | {"language": "fr"}))
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path))
    app = AppTest.from_file(str(PAGE), default_timeout=180).run()
    assert not app.exception, app.exception
    assert not app.radio
    assert "No example in the language of this page's models (fr)" in _caption_texts(app)
    assert any("Enter at least one option" in w.value for w in app.warning)
    app.text_area[0].input("The sky on a clear day is blue.")
    app.text_area[1].input("red\nblue").run()
    assert not app.exception, app.exception
    assert "Answered by **tiny_fr (version 1)**" in _caption_texts(app)
    assert "**Answer:**" in app.success[0].value


def test_app_explains_how_to_get_a_model_when_none(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path / "empty"))
    app = AppTest.from_file(str(PAGE), default_timeout=60).run()
    assert not app.exception
    assert "No exported model found" in app.error[0].value
    assert "python -m albert_tf.demo_models" in app.code[0].value


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_no_page_lets_a_visitor_choose_the_models_folder(page, monkeypatch, tmp_path):
    # A SavedModel's graph can read and write the host's files: the folder is the
    # operator's, set at start-up; a visitor sees it and can type no path anywhere.
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path / "operators"))
    app = AppTest.from_file(str(page), default_timeout=60).run()
    assert not app.exception
    typed = [w.label for w in (*app.text_input, *app.sidebar.text_input)]
    assert not [label for label in typed if "folder" in label.lower()], typed
    assert any(str(tmp_path / "operators") in c.value for c in app.sidebar.caption)
    assert f"`{tmp_path / 'operators'}`" in app.error[0].value  # only the operator's folder


def test_the_operator_sets_the_folder_on_the_command_line(monkeypatch):
    monkeypatch.syspath_prepend(str(APPS))
    from exported_models import models_dir

    monkeypatch.setenv("ALBERT_MODELS_DIR", "/from/env")
    assert models_dir([]) == "/from/env"
    assert models_dir(["--models_dir=/srv/models"]) == "/srv/models"
    assert models_dir(["--other", "--models_dir", "/srv/m"]) == "/srv/m"


@pytest.mark.parametrize(
    "card",
    [
        {"held_out": {"accuracy": 0.4}, "shared_sets": {"x": {"accuracy": 0.3}}},
        {"held_out": {"accuracy": "n/a", "chance": None}, "shared_sets": [1]},
        # A demo fine-tuned from a shipped encoder (demo_models --zh_encoder).
        {
            "held_out": {"accuracy": 0.4},
            "pretraining": {"encoder": "albert_tiny_zh", "steps": 2800, "mlm_accuracy": 0.1391},
            "finetuning": {"items": 1200, "seconds": 600},
        },
    ],
)
def test_a_partial_model_card_is_shown_without_a_crash(card, mc_models, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    # A copy of the Chinese model whose card lacks most keys: cards have no fixed schema.
    export = tmp_path / "partial_card" / "1"
    shutil.copytree(mc_models["zh"]["saved_model"], export)
    (export / "assets.extra" / "model_card.json").write_text(json.dumps(card))
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path))
    app = AppTest.from_file(str(PAGE), default_timeout=180).run()
    assert not app.exception, app.exception
    assert "**Answer:**" in app.success[0].value
    metrics = [(m.label, m.value) for m in app.sidebar.metric]
    if card["held_out"]["accuracy"] == 0.4:
        assert ("Held-out accuracy", "40.0%") in metrics
    else:
        assert not any(label == "Held-out accuracy" for label, _ in metrics)
    if "pretraining" in card:
        sidebar = " ".join(m.value for m in app.sidebar.markdown)
        assert (
            "1,200 questions (10 min on 2 CPU cores), starting from the pretrained encoder "
            "`albert_tiny_zh` (2,800 pretraining steps, held-out MLM accuracy 13.9%)"
        ) in sidebar


def test_a_card_naming_the_strongest_baseline_is_compared_with_it(mc_models, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    # A card written since the four overlap baselines: each held-out set names the
    # strongest as "baseline", and the page compares the model with that one alone.
    name = "shared characters, length-normalised, weighted by rarity"
    card = {
        "held_out": {
            "accuracy": 0.8311,
            "chance": 0.25,
            "overlap_idf_baseline": 0.755,
            "baseline": {"name": name, "weighting": "idf_normalized", "accuracy": 0.8295},
        },
        "held_out_one_sentence": {
            "accuracy": 0.8102,
            "overlap_count_baseline": 0.677,
            "overlap_idf_baseline": 0.7305,
            "baseline": {"name": name, "weighting": "idf_normalized", "accuracy": 0.7755},
            "previous_model": {"path": "models/exported/albert_demo_zh/6", "accuracy": 0.7275},
        },
    }
    export = tmp_path / "strongest" / "1"
    shutil.copytree(mc_models["zh"]["saved_model"], export)
    (export / "assets.extra" / "model_card.json").write_text(json.dumps(card))
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path))
    app = AppTest.from_file(str(PAGE), default_timeout=180).run()
    assert not app.exception, app.exception
    short = app.sidebar.metric[1]
    assert (short.label, short.value) == ("Held-out accuracy, one-sentence context", "81.0%")
    assert short.delta == "+3.5% vs the baseline"
    captions = "\n".join(c.value for c in app.sidebar.caption)
    assert f"the baseline ({name}) scores 83.0%" in captions
    assert (
        f"On the same questions, the baseline, the best rule of shared units ({name}): 77.5%; "
        "the model this one replaced: 72.8%."
    ) in captions
    assert "counting shared" not in captions and "weighted by rarity: 73" not in captions
    # This export scores with the model alone: no parts of the score in the table.
    assert "model part" not in app.dataframe[0].value.columns


def test_an_export_that_adds_the_overlap_shows_both_parts(mc_models, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from albert_tf.baselines.overlap import DocumentFrequencies, option_scores
    from albert_tf.serving import export_saved_model
    from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample

    # The tiny Chinese model with made-up weights and training-document frequencies
    # (what the demo's combine stage writes into finetune.json): its export adds the
    # overlap to the model's score in its graph and returns both parts.
    model_dir = tmp_path / "model"
    shutil.copytree(mc_models["zh"]["model"], model_dir)
    settings = json.loads((model_dir / "finetune.json").read_text())
    settings["overlap_combination"] = {
        "model_weight": 0.5,
        "overlap_weight": 2.0,
        "documents": 4,
        "document_frequency": {"算": 1, "法": 1, "的": 4, "们": 2},
    }
    (model_dir / "finetune.json").write_text(json.dumps(settings))
    export_saved_model(model_dir, tmp_path / "exported" / "combined", version=1)
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path / "exported"))
    app = AppTest.from_file(str(PAGE), default_timeout=180).run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    assert list(table.columns[:4]) == ["option", "probability", "model part", "overlap part"]
    # The overlap part: 2 × the idf_normalized baseline with those frequencies (the
    # last two options share nothing with the context).
    combination = settings["overlap_combination"]
    frequencies = DocumentFrequencies(4, combination["document_frequency"])
    item = MultipleChoiceExample("1", EXAMPLE_CONTEXT_ZH, "", EXAMPLE_OPTIONS_ZH, 1)
    expected = [2.0 * s for s in option_scores(item, "idf_normalized", frequencies)]
    np.testing.assert_allclose(table["overlap part"].to_numpy(), expected, atol=2e-4)
    assert expected[1] > expected[0] > 0 == expected[2] == expected[3]
    # The two parts are the score the probabilities are the softmax of.
    score = (table["model part"] + table["overlap part"]).to_numpy()
    softmax = np.exp(score - score.max()) / np.exp(score - score.max()).sum()
    np.testing.assert_allclose(table["probability"].to_numpy(), softmax, atol=2e-4)
    assert any(
        c.value.startswith("Each score is 0.5 × the model's logit + 2 × the overlap")
        for c in app.caption
    )


def test_score_parts_split_each_option_score_by_the_export_weights(monkeypatch):
    monkeypatch.syspath_prepend(str(APPS))
    from exported_models import score_parts

    # What serving_default returns when the export adds the overlap in its graph
    # (a batch of one, three options), and the weights its albert_tf.json records.
    result = {
        "logits": np.array([[1.1, -0.4, 0.35]], np.float32),
        "model_logits": np.array([[1.0, -2.0, 0.5]], np.float32),
        "overlap": np.array([[0.2, 0.5, 0.0]], np.float32),
    }
    meta = {"overlap_combination": {"model_weight": 0.7, "overlap_weight": 2.0, "documents": 9}}
    columns, how = score_parts(result, meta)
    np.testing.assert_allclose(columns["model part"], [0.7, -1.4, 0.35], rtol=1e-6)
    np.testing.assert_allclose(columns["overlap part"], [0.4, 1.0, 0.0], rtol=1e-6)
    # The two parts add up to the logits the probabilities are the softmax of.
    total = np.add(columns["model part"], columns["overlap part"])
    np.testing.assert_allclose(total, result["logits"][0], rtol=1e-6)
    assert how.startswith("Each score is 0.7 × the model's logit + 2 × the overlap")
    # Parts without their weights are shown as they are; an older export has none.
    columns, how = score_parts(result, {"overlap_combination": {"model_weight": "?"}})
    assert list(columns) == ["model logit", "overlap"] and "not the weights" in how
    assert score_parts({k: result[k] for k in ("logits",)}, meta) is None


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_app_renders_and_answers_in_headless_chromium(mc_models, tmp_path):
    with app_in_chromium(APP, mc_models["zh"]["export"].parent, tmp_path) as page:
        page.open("/")
        folder = screenshot_dir(tmp_path)
        # And the sidebar's card: once, on a loaded host, the answer was seen before it.
        pages = {"zh": page.wait_for("Answer:", "Latency", "Answered by tiny_zh", "Held-out")}
        page.screenshot(folder / "multiple_choice_app_zh.png")
        # A visitor switches to the English example: the English model answers.
        page.click_label("English")
        pages["en"] = page.wait_for("Answer:", "Answered by tiny_en")
        page.screenshot(folder / "multiple_choice_app_en.png")
    for lang, text in pages.items():
        (tmp_path / f"page_{lang}.txt").write_text(text)
        assert "ALBERT multiple choice" in text
        assert "Answer:" in text, text[-2000:]
        assert (folder / f"multiple_choice_app_{lang}.png").stat().st_size > 10_000
    # Random weights: any of the example's options may win.
    assert any(f"Answer: {o}" in pages["zh"] for o in EXAMPLE_OPTIONS_ZH), pages["zh"][-2000:]
    assert "Answered by tiny_zh" in pages["zh"] and "Held-out accuracy" in pages["zh"]
    assert "Answered by tiny_en" in pages["en"], pages["en"][-2000:]
    # The English model has no card: the sidebar says so instead of showing one.
    assert "no model card was exported" in pages["en"]


SHIPPED = REPO / "models" / "exported"
EXAMPLE_CONTEXT_ZH = "算法组的成员们精通各种AI算法."
EXAMPLE_OPTIONS_ZH = [
    "成都动物园里的大熊猫人人都想摸一下.",
    "他们主要负责AI算法的研究和落地.",
    "我没吃上吉士果.",
    "你吃饭了吗?",
]


def test_the_shipped_demo_models_answer_both_examples(monkeypatch):
    """What a visitor sees right after the install: the demo models in models/exported
    (models/README.md) answer the seeds' Chinese example with option 2 and the English
    example with its on-topic sentence, each with the model of its language."""
    from streamlit.testing.v1 import AppTest

    assert {p.name for p in SHIPPED.iterdir() if p.is_dir()} >= {"albert_demo_zh", "albert_demo_en"}
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(SHIPPED))
    app = AppTest.from_file(str(PAGE), default_timeout=180)
    app.run()
    assert not app.exception, app.exception
    expected = {
        "中文": ("albert_demo_zh", "他们主要负责AI算法的研究和落地."),
        "English": (
            "albert_demo_en",
            "He asked for relief for the farmers who had lost their crops.",
        ),
    }
    for example, (model, answer) in expected.items():
        app.radio[0].set_value(example).run()
        assert not app.exception, app.exception
        table = app.dataframe[0].value
        assert table.loc[table["probability"].idxmax(), "option"] == answer
        assert f"Answered by **{model} (version" in _caption_texts(app)
        # Typed half-width (AI, ".") against a vocabulary from full-width newsprint.
        assert not [w.value for w in app.warning if "[UNK]" in w.value]
        if example == "中文":
            # The card's figure for how the demo is used: a one-sentence context.
            labels = [m.label for m in app.sidebar.metric]
            assert "Held-out accuracy, one-sentence context" in labels


# Half-width Latin letters, digits and ASCII punctuation inside Chinese, as people
# type it; its newsprint corpus printed all of these full-width.
HALF_WIDTH = {
    "context": "我们用Python和TensorFlow 2.21训练了一个ALBERT模型, batch size是64.",
    "options": [
        "成都动物园里的大熊猫人人都想摸一下.",
        "训练在2块CPU上跑了大约1个小时.",
        "我没吃上吉士果.",
        "你吃饭了吗?",
    ],
}
HALF_WIDTH_ANSWER = 1


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_the_shipped_chinese_model_reads_typed_text_in_chromium(tmp_path):
    """The seeds' example, then a half-width English-in-Chinese sentence typed into the
    page: both answered by the shipped Chinese model without the [UNK] warning."""
    with app_in_chromium(APP, SHIPPED, tmp_path) as page:
        page.open("/")
        folder = screenshot_dir(tmp_path)
        seeds = page.wait_for(
            "Answer: 他们主要负责AI算法的研究和落地.", "by albert_demo_zh", "one-sentence context"
        )
        page.type_into("Context", HALF_WIDTH["context"])
        page.type_into("Options (one per line)", "\n".join(HALF_WIDTH["options"]))
        typed = page.wait_for(f"Answer: {HALF_WIDTH['options'][HALF_WIDTH_ANSWER]}")
        page.screenshot(folder / "multiple_choice_app_half_width.png")
        fields = [page.field_value(label) for label in ("Context", "Options (one per line)")]
    assert "Answer: 他们主要负责AI算法的研究和落地." in seeds, seeds[-2000:]
    assert "one-sentence context" in seeds
    assert fields == [HALF_WIDTH["context"], "\n".join(HALF_WIDTH["options"])]
    assert f"Answer: {HALF_WIDTH['options'][HALF_WIDTH_ANSWER]}" in typed, typed[-2000:]
    assert "Answered by albert_demo_zh" in typed
    for text in (seeds, typed):
        assert "unknown to this model's vocabulary" not in text
