"""The question-answering page, driven by Streamlit's AppTest and by a real headless
Chromium against `streamlit run apps/app.py` (skipped when chromium is not installed), with the tiny
span QA model of reader_helpers beside the multiple-choice models in one models folder."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import tensorflow as tf
from helpers.app_browser import CHROMIUM, SKIP_REASON, app_in_chromium, screenshot_dir
from helpers.paths import REPO

APPS = REPO / "apps"
PAGE = APPS / "task_pages" / "question_answering.py"
APP = APPS / "app.py"


@pytest.fixture(scope="module")
def models_dir(reader_models, mc_models, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("reader_and_mc")
    (base / reader_models["export"].name).symlink_to(reader_models["export"])
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


def _answer(saved_model: Path, question: str, context: str) -> tuple[str, int, int, float]:
    out = _load(saved_model).signatures["serving_default"](
        question=tf.constant([question]), context=tf.constant([context])
    )
    return (
        out["answer"].numpy()[0].decode(),
        int(out["start"].numpy()[0]),
        int(out["end"].numpy()[0]),
        float(out["score"].numpy()[0]),
    )


def _metrics(app) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def test_page_highlights_the_saved_models_answer(app, reader_models):
    saved_model = reader_models["saved_model"]
    app.run()
    assert not app.exception, app.exception
    # The folder's only reader is Chinese: the page offers, and opens on, the Chinese
    # example alone (the English one would be all [UNK] to it).
    assert app.radio[0].options == ["中文"] and app.radio[0].value == "中文"
    assert "SOP" in app.text_area[0].value
    app.radio[0].set_value("中文").run()
    assert not app.exception, app.exception
    question, context = app.text_input[0].value, app.text_area[0].value
    assert question.startswith("ALBERT") and "SOP" in context
    captions = "\n".join(c.value for c in [*app.caption, *app.sidebar.caption])
    assert "Answered by **tiny_qa_zh (version 1)** (Chinese): the text is Chinese" in captions
    answer, start, end, score = _answer(saved_model, question, context)
    assert start >= 0 and answer == context[start:end]
    assert any(f"**Answer:** {answer}" == s.value for s in app.success)
    marked = next(m.value for m in app.markdown if "<mark" in m.value)
    assert f">{answer}</mark>" in marked
    assert _metrics(app)["Characters"] == f"{start}–{end}"
    assert _metrics(app)["Score"] == f"{score:.3f}"
    card = app.sidebar.metric[0]
    assert (card.label, card.value) == ("Held-out answer F1", "0.350")
    assert "vs the first people sentence 0.250" in card.delta

    # Another context, longer than one window: the page follows the SavedModel again,
    # and escapes what it shows.
    context = "<b>王明</b>在北京工作。" + "今天下雨，大家都在家里。" * 12
    app.text_area[0].input(context).run()
    assert not app.exception, app.exception
    answer, start, end, _ = _answer(saved_model, question, context)
    assert _metrics(app)["Characters"] == (f"{start}–{end}" if start >= 0 else "none")
    assert int(_metrics(app)["Windows read"]) > 1
    assert "<b>" not in "".join(m.value for m in app.markdown)


def test_missing_and_huge_input(app):
    app.run()
    app.text_input[0].input(" ").run()
    assert any("Enter a question" in w.value for w in app.warning)
    app.text_input[0].input("谁？").run()
    app.text_area[0].input("").run()
    assert any("Enter a context" in w.value for w in app.warning)
    app.text_area[0].input("北京很大。" * 2400).run()  # 12,000 characters
    assert not app.exception, app.exception
    assert any("12,000 characters" in i.value and "first 10,000" in i.value for i in app.info)


def test_no_reader_in_the_folder_says_how_to_make_one(mc_models, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(mc_models["zh"]["export"].parent))
    app = AppTest.from_file(str(PAGE), default_timeout=180)
    app.run()
    assert "No exported model found" in app.error[0].value
    assert "qa_en_pico.flags" in app.code[0].value


@pytest.mark.skipif(not CHROMIUM, reason=SKIP_REASON)
def test_page_in_a_real_browser(app, models_dir, reader_models, tmp_path):
    app.run()  # the page's first example, as a visitor first sees it
    question, context = app.text_input[0].value, app.text_area[0].value
    answer, *_ = _answer(reader_models["saved_model"], question, context)
    assert answer, "the random reader answers the Chinese example"
    needles = ["ALBERT question answering", "Held-out answer F1", "Answer:", answer]
    with app_in_chromium(APP, models_dir, tmp_path) as page:
        page.open("/question_answering")
        text = page.wait_for(*needles)
        screenshot = page.screenshot(screenshot_dir(tmp_path) / "question_answering_app.png")
    assert all(n in text for n in needles), text[-2000:]
    assert "question answering" in text and "tagging" in text  # the sidebar's pages
    assert screenshot.stat().st_size > 10_000
