"""The app's entry point, `apps/app.py`: one `streamlit run` serves the four pages, each
answering its first example; the old entry name, `apps/multiple_choice.py`, still serves
the same app. Driven by Streamlit's AppTest and by a real headless Chromium (skipped
when chromium is not installed), with every task's tiny models in one models folder,
as models/exported holds them."""

from __future__ import annotations

import doctest
import importlib
import json
from pathlib import Path

import pytest
from helpers.app_browser import CHROMIUM, SKIP_REASON, app_in_chromium, screenshot_dir
from helpers.paths import REPO

APPS = REPO / "apps"
APP = APPS / "app.py"
OLD_NAME = APPS / "multiple_choice.py"
SHIPPED = REPO / "models" / "exported"
# Each page, its title, what its answer to its first example holds, and the tasks it
# lists (as apps/exported_models.py names them).
PAGES = {
    "task_pages/multiple_choice.py": ("ALBERT multiple choice", "**Answer:**", "MULTIPLE_CHOICE"),
    "task_pages/classification.py": ("ALBERT text classification", "**Label:**", "CLASSIFICATION"),
    "task_pages/tagging.py": ("ALBERT named entities", "entities:**", "TAGGING"),
    "task_pages/question_answering.py": ("ALBERT question answering", "**Answer:**", "SPAN_QA"),
}


@pytest.fixture(scope="module")
def models_dir(mc_models, classifier_models, tagger_models, reader_models, tmp_path_factory):
    """Every task's tiny models side by side."""
    base = tmp_path_factory.mktemp("every_task")
    exports = [p["export"] for group in (mc_models, classifier_models) for p in group.values()]
    for export in (*exports, tagger_models["export"], reader_models["export"]):
        (base / export.name).symlink_to(export, target_is_directory=True)
    return base


@pytest.mark.parametrize("entry", [APP, OLD_NAME], ids=["app", "old_name"])
def test_the_entry_point_serves_the_four_pages(entry, models_dir, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(models_dir))
    app = AppTest.from_file(str(entry), default_timeout=180).run()
    assert not app.exception, app.exception
    assert app.title[0].value == "ALBERT multiple choice"  # the start page
    # switch_page takes only a page st.navigation registered: the entry lists all four.
    for page, (title, answer, _) in PAGES.items():
        app.switch_page(page).run()
        assert not app.exception, (page, app.exception)
        assert [t.value for t in app.title] == [title]
        assert app.success and answer in app.success[0].value, page
        # Each page opens on an example in the language of one of its models, which
        # answers it (the tiny test vocabularies still miss some characters).
        captions = "\n".join(c.value for c in app.caption)
        assert "Answered by **" in captions and "the text is " in captions, captions
        assert "model found; using the first one" not in captions


def test_each_page_answers_its_first_example_with_the_shipped_models(monkeypatch):
    """What a visitor sees right after the install: a page with a shipped model of its
    task (models/exported) answers its first example with the model of that example's
    language, and no [UNK] warning. Every page has one."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.syspath_prepend(str(APPS))
    import exported_models

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(SHIPPED))
    app = AppTest.from_file(str(APP), default_timeout=180).run()
    for page, (_, answer, tasks) in PAGES.items():
        app.switch_page(page).run()
        assert not app.exception, (page, app.exception)
        assert exported_models.find_models(
            str(SHIPPED), getattr(exported_models, f"{tasks}_TASKS")
        ), f"no shipped model for the {page} page"
        captions = "\n".join(c.value for c in app.caption)
        assert app.success and answer in app.success[0].value, page
        assert "the text is " in captions, captions
        assert not [w.value for w in app.warning], (page, [w.value for w in app.warning])


def test_a_models_language_comes_from_its_export_else_its_card(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(APPS))
    from exported_models import model_language

    extra = tmp_path / "assets.extra"
    extra.mkdir()
    assert model_language(tmp_path) is None
    (extra / "model_card.json").write_text(json.dumps({"language": "en"}))
    assert model_language(tmp_path) == "en"
    (extra / "albert_tf.json").write_text(json.dumps({"language": "zh"}))
    assert model_language(tmp_path) == "zh"


@pytest.mark.parametrize("module", ["exported_models", "page"])
def test_the_apps_docstring_examples_run(module, monkeypatch):
    # tests/test_docstring_examples.py walks the package only.
    monkeypatch.syspath_prepend(str(APPS))
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_a_visitor_switches_pages_in_the_sidebar_in_headless_chromium(models_dir, tmp_path):
    folder = screenshot_dir(tmp_path)
    with app_in_chromium(APP, models_dir, tmp_path) as page:
        page.open("/")
        start = page.wait_for("ALBERT multiple choice", "Answer:", "Answered by tiny_zh")
        page.click_link("question answering")
        qa = page.wait_for("ALBERT question answering", "Answer:", "Answered by tiny_qa_zh")
        page.screenshot(folder / "app_question_answering.png")
    for text in (start, qa):
        for title in ("multiple choice", "classification", "tagging", "question answering"):
            assert title in text, text[-2000:]
    assert "Answer:" in start and "Answered by tiny_zh" in start, start[-2000:]
    assert "Answered by tiny_qa_zh" in qa, qa[-2000:]
    assert "unknown to this model's vocabulary" not in qa
    assert (folder / "app_question_answering.png").stat().st_size > 10_000


def test_every_page_file_is_served_by_the_entry_point():
    assert {Path(p).name for p in PAGES} == {p.name for p in (APPS / "task_pages").glob("*.py")}
    # Streamlit takes a pages/ folder beside the entry point for its older multipage
    # layout, and then two pages would claim one address.
    assert not (APPS / "pages").exists()


# What a visitor types into each page, and what the shipped model then shows.
TYPED = {
    "classification": (
        {"Text": "太差了，用了两天就坏了，客服也不理人，退货。"},
        ("Label: 0", "Answered by albert_reviews_zh"),
    ),
    "tagging": (
        {"Text": "李鹏总理昨天在上海会见了日本客人。"},
        ("entities:", "李鹏", "Answered by albert_ner_zh"),
    ),
    "question_answering": (
        {
            "Question": "Who took part in this trial?",
            "Context": "Forty-two children aged 6 to 12 years with asthma were enrolled in "
            "this trial of inhaled budesonide. Lung function improved after 8 weeks.",
        },
        ("Answer:", "children", "Answered by albert_qa_en_pico"),
    ),
}


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_each_page_answers_what_a_visitor_types_with_the_shipped_models(tmp_path):
    """Right after the install: each task page opens answered by its shipped model, and
    answers text typed into it (the multiple-choice page's own test types into it)."""
    folder = screenshot_dir(tmp_path)
    seen = {}
    with app_in_chromium(APP, SHIPPED, tmp_path) as page:
        for address, (fields, needles) in TYPED.items():
            page.open(f"/{address}")
            opened = page.wait_for("Answered by albert_")
            for label, text in fields.items():
                page.type_into(label, text)
            seen[address] = (opened, page.wait_for(*needles))
            page.screenshot(folder / f"shipped_{address}.png")
    for address, (opened, typed) in seen.items():
        assert "No exported model found" not in opened, address
        for needle in TYPED[address][1]:
            assert needle in typed, (address, needle, typed[-2000:])
        assert "unknown to this model's vocabulary" not in typed, address
