"""The classification page, driven by Streamlit's AppTest and by a real headless
Chromium against `streamlit run apps/app.py` (skipped when chromium is not installed), with the
tiny classifiers of classifier_helpers and the multiple-choice models of mc_helpers
in one models folder, as models/exported holds them."""

from __future__ import annotations

import functools
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
PAGE = APPS / "task_pages" / "classification.py"
APP = APPS / "app.py"
MC_PAGE = APPS / "task_pages" / "multiple_choice.py"
REVIEW = "这个手机用了一个月，电池很耐用，屏幕也清楚，推荐购买。"


@pytest.fixture(scope="module")
def models_dir(classifier_models, mc_models, tmp_path_factory) -> Path:
    """Both classifiers and both multiple-choice models side by side."""
    base = tmp_path_factory.mktemp("all_models")
    for group in (classifier_models, mc_models):
        for paths in group.values():
            (base / paths["export"].name).symlink_to(paths["export"], target_is_directory=True)
    return base


@pytest.fixture()
def app(models_dir, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(models_dir))
    return AppTest.from_file(str(PAGE), default_timeout=180)


@functools.cache
def _load(saved_model: Path):
    return tf.saved_model.load(str(saved_model))


def _served(saved_model: Path, text: str, pair: str = "") -> dict[str, np.ndarray]:
    out = _load(saved_model).signatures["serving_default"](
        text=tf.constant([text]), text_pair=tf.constant([pair])
    )
    return {k: v.numpy()[0] for k, v in out.items()}


def _captions(app) -> str:
    return "\n".join(c.value for c in [*app.caption, *app.sidebar.caption])


def test_page_shows_each_label_probability_as_the_saved_model_does(app, classifier_models):
    saved_model = classifier_models["zh"]["saved_model"]
    app.run()
    assert not app.exception, app.exception
    # The Chinese review is shown by default and answered by the Chinese classifier,
    # picked by script, whose card is in the sidebar.
    assert app.text_area[0].value == REVIEW
    assert "Answered by **tiny_reviews_zh (version 1)**" in _captions(app)
    assert "the text is Chinese" in _captions(app)
    table = app.dataframe[0].value
    assert table["label"].tolist() == ["negative", "positive"]
    expected = _served(saved_model, REVIEW)
    np.testing.assert_allclose(table["probability"], expected["probabilities"], atol=1e-5)
    assert f"**Label:** {expected['label'].decode()}" in app.success[0].value
    assert any(m.label.startswith("Latency") for m in app.metric)
    assert app.expander[0].label == "How the input was tokenised"
    card = app.sidebar.metric[0]
    assert (card.label, card.value) == ("Held-out accuracy", "62.0%")
    assert "vs bag of units baseline 90.0%" in card.delta  # the strongest reference
    assert "majority class 55.0%" in _captions(app)

    # Another text, now with a second text: the page follows the SavedModel again,
    # and the tiny model's probabilities do differ between texts.
    text, pair = "质量太差了，用了两天就坏了。", "屏幕也清楚。"
    app.text_area[0].input(text)
    app.text_area[1].input(pair).run()
    assert not app.exception, app.exception
    other = _served(saved_model, text, pair)
    np.testing.assert_allclose(
        app.dataframe[0].value["probability"], other["probabilities"], atol=1e-5
    )
    assert np.abs(other["probabilities"] - expected["probabilities"]).max() > 0.01
    tokens = "\n".join(c.value for c in app.expander[0].code)
    assert "屏 幕" in tokens  # the second text's pieces, in segment 1


def test_english_text_gets_the_regression_models_score(app, classifier_models):
    app.run()
    app.radio[0].set_value("English").run()
    assert not app.exception, app.exception
    assert "Answered by **tiny_score_en (version 1)**" in _captions(app)
    assert "the text is English" in _captions(app)
    text = app.text_area[0].value
    expected = float(_served(classifier_models["en"]["saved_model"], text)["score"])
    score = float(app.dataframe[0].value["score"].iloc[0])
    assert abs(score - expected) < 1e-5
    assert f"**Score:** {expected:.4f}" in app.success[0].value
    assert "regression: one score" in app.sidebar.markdown[0].value
    assert "no model card was exported" in _captions(app)
    assert not app.sidebar.metric


def test_empty_text_gets_a_message_not_an_answer(app):
    app.run()
    start = time.perf_counter()
    app.text_area[0].input("   ")
    app.text_area[1].input("a second text alone").run()
    assert not app.exception, app.exception
    assert any("Enter a text" in w.value for w in app.warning), [w.value for w in app.warning]
    assert not app.success and not app.dataframe
    assert time.perf_counter() - start < 30


def test_a_huge_text_is_cut_with_a_note_and_still_answered(app, classifier_models):
    app.run()
    huge = "电池很耐用。" * 8334  # 50,004 characters
    start = time.perf_counter()
    app.text_area[0].input(huge).run()
    assert not app.exception, app.exception
    notes = [i.value for i in app.info]
    assert any("50,004 characters" in n and "first 2,000" in n for n in notes), notes
    assert any("fills the model's max_seq_length (64 pieces)" in n for n in notes), notes
    expected = _served(classifier_models["zh"]["saved_model"], huge[:2000])
    np.testing.assert_allclose(
        app.dataframe[0].value["probability"], expected["probabilities"], atol=1e-5
    )
    assert time.perf_counter() - start < 60


def test_each_page_lists_only_the_models_of_its_task(app, models_dir, monkeypatch):
    from streamlit.testing.v1 import AppTest

    app.run()
    assert app.sidebar.selectbox[0].options[1:] == [
        "tiny_reviews_zh (version 1)",
        "tiny_score_en (version 1)",
    ]
    mc = AppTest.from_file(str(MC_PAGE), default_timeout=180).run()
    assert not mc.exception, mc.exception
    assert mc.sidebar.selectbox[0].options[1:] == ["tiny_en (version 1)", "tiny_zh (version 1)"]
    assert "Answered by **tiny_zh (version 1)**" in _captions(mc)

    # A folder holding only a classifier has no model for the multiple-choice page.
    only = models_dir.parent / "only_classifier"
    only.mkdir(exist_ok=True)
    if not (only / "tiny_reviews_zh").exists():
        (only / "tiny_reviews_zh").symlink_to(models_dir / "tiny_reviews_zh")
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(only))
    mc = AppTest.from_file(str(MC_PAGE), default_timeout=60).run()
    assert not mc.exception, mc.exception
    assert "No exported model found" in mc.error[0].value


def test_page_explains_how_to_get_a_classifier_when_none(mc_models, monkeypatch):
    from streamlit.testing.v1 import AppTest

    # Multiple-choice models only: nothing this page can use.
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(mc_models["zh"]["export"].parent))
    app = AppTest.from_file(str(PAGE), default_timeout=60).run()
    assert not app.exception, app.exception
    assert "No exported model found" in app.error[0].value
    assert "albert_tf.finetune --flagfile=configs/classify_zh_reviews.flags" in app.code[0].value


@pytest.mark.parametrize(
    "card",
    [
        {"held_out": {"accuracy": "n/a", "items": "many", "chance": None}, "trained_on": [1, {}]},
        {"held_out": [0.5], "task": {"labels": 2}, "good_at": None, "finetuning": 3},
        {"held_out": {"pearson": 0.4, "baselines": {"bag of words": 0.3, "bad": "x"}}},
    ],
)
def test_any_model_card_shape_is_shown_without_a_crash(
    card, classifier_models, tmp_path, monkeypatch
):
    from streamlit.testing.v1 import AppTest

    # A copy of the Chinese classifier with an odd card: cards have no fixed schema.
    export = tmp_path / "odd_card" / "1"
    shutil.copytree(classifier_models["zh"]["saved_model"], export)
    (export / "assets.extra" / "model_card.json").write_text(json.dumps(card))
    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path))
    app = AppTest.from_file(str(PAGE), default_timeout=180).run()
    assert not app.exception, app.exception
    assert app.sidebar.subheader[0].value == "Model card"
    assert "**Label:**" in app.success[0].value


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_page_renders_the_labels_in_headless_chromium(models_dir, tmp_path):
    # The real `streamlit run` of the app, whose sidebar lists the four pages.
    needles = ("Label:", "Latency", "Answered by tiny_reviews_zh", "negative", "positive")
    with app_in_chromium(APP, models_dir, tmp_path) as page:
        # The page's URL path is its file name under apps/task_pages/.
        page.open("/classification")
        text = page.wait_for(*needles)
        screenshot = page.screenshot(screenshot_dir(tmp_path) / "classification_app_zh.png")
    (tmp_path / "page_zh.txt").write_text(text)
    assert "ALBERT text classification" in text, text[-2000:]
    assert all(n in text for n in needles), text[-2000:]
    assert "Held-out accuracy" in text
    # Every page is in the sidebar's navigation.
    assert "multiple choice" in text and "classification" in text
    assert "tagging" in text and "question answering" in text
    assert screenshot.stat().st_size > 10_000
