"""The named-entity page, driven by Streamlit's AppTest and by a real headless Chromium
against `streamlit run apps/app.py` (skipped when chromium is not installed), with the tiny tagger
of tagger_helpers beside the multiple-choice models in one models folder."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers.app_browser import CHROMIUM, SKIP_REASON, app_in_chromium, screenshot_dir
from helpers.paths import REPO

APPS = REPO / "apps"
PAGE = APPS / "task_pages" / "tagging.py"
APP = APPS / "app.py"
EXAMPLE = "江泽民主席在北京人民大会堂会见了美国总统克林顿。"


@pytest.fixture(scope="module")
def models_dir(tagger_models, mc_models, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("tagger_and_mc")
    (base / tagger_models["export"].name).symlink_to(tagger_models["export"])
    for paths in mc_models.values():
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


def _entities(saved_model: Path, text: str) -> list[tuple[int, int, str, float]]:
    out = _load(saved_model).signatures["serving_default"](text=tf.constant([text]))
    rows = zip(
        out["starts"].numpy()[0],
        out["ends"].numpy()[0],
        out["labels"].numpy()[0],
        out["scores"].numpy()[0],
        strict=True,
    )
    return [(int(s), int(e), label.decode(), float(p)) for s, e, label, p in rows if s >= 0]


def _table(app) -> list[tuple[int, int, str, float]]:
    table = app.dataframe[0].value
    return list(
        zip(table["start"], table["end"], table["label"], table["score"].astype(float), strict=True)
    )


def test_page_lists_and_colours_the_saved_models_entities(app, tagger_models):
    saved_model = tagger_models["saved_model"]
    app.run()
    assert not app.exception, app.exception
    assert app.text_area[0].value == EXAMPLE
    # The folder's only tagger is Chinese: no English example to send it.
    assert app.radio[0].options == ["中文"]
    captions = "\n".join(c.value for c in [*app.caption, *app.sidebar.caption])
    assert "Answered by **tiny_ner_zh (version 1)** (Chinese): the text is Chinese" in captions
    want = _entities(saved_model, EXAMPLE)
    assert want, "the random tagger finds something to show"
    got = _table(app)
    assert [g[:3] for g in got] == [w[:3] for w in want]
    np.testing.assert_allclose([g[3] for g in got], [w[3] for w in want], atol=1e-6)
    entities = app.dataframe[0].value["entity"].tolist()
    assert entities == [EXAMPLE[s:e] for s, e, _, _ in want]
    marked = next(m.value for m in app.markdown if "<mark" in m.value)
    assert marked.count("<mark") == len(want)
    card = app.sidebar.metric[0]
    assert (card.label, card.value) == ("Held-out entity F1", "0.444")
    assert "vs a gazetteer 0.600" in card.delta

    # Another text: the page follows the SavedModel again, and escapes what it shows.
    text = "<b>李华</b>去了上海和南京。"
    app.text_area[0].input(text).run()
    assert not app.exception, app.exception
    assert [g[:3] for g in _table(app)] == [w[:3] for w in _entities(saved_model, text)]
    assert "<b>" not in "".join(m.value for m in app.markdown)


def test_empty_and_huge_texts(app):
    app.run()
    app.text_area[0].input("  ").run()
    assert any("Enter a text" in w.value for w in app.warning)
    assert not app.dataframe
    app.text_area[0].input("北京很大。" * 2000).run()  # 10,000 characters
    assert not app.exception, app.exception
    assert any("10,000 characters" in i.value and "first 5,000" in i.value for i in app.info)


def test_no_tagger_in_the_folder_says_how_to_make_one(mc_models, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(mc_models["zh"]["export"].parent))
    app = AppTest.from_file(str(PAGE), default_timeout=180)
    app.run()
    assert "No exported model found" in app.error[0].value
    assert "tag_zh_peoples_daily.flags" in app.code[0].value


@pytest.mark.skipif(not CHROMIUM, reason=SKIP_REASON)
def test_page_in_a_real_browser(models_dir, tagger_models, tmp_path):
    want = _entities(tagger_models["saved_model"], EXAMPLE)
    needles = ["ALBERT named entities", "Held-out entity F1", EXAMPLE[want[0][0] : want[0][1]]]
    with app_in_chromium(APP, models_dir, tmp_path) as page:
        page.open("/tagging")
        text = page.wait_for(*needles)
        screenshot = page.screenshot(screenshot_dir(tmp_path) / "tagging_app_zh.png")
    assert all(n in text for n in needles), text[-2000:]
    assert "tagging" in text and "classification" in text  # the sidebar's pages
    assert screenshot.stat().st_size > 10_000
