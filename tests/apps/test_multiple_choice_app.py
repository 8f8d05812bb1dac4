"""The Streamlit app, driven by Streamlit's AppTest and by a real headless
Chromium against `streamlit run` (skipped when chromium is not installed)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

APP = Path(__file__).resolve().parents[2] / "apps" / "multiple_choice.py"


@pytest.fixture()
def app(mc_models, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(mc_models["zh"]["export"].parent))
    return AppTest.from_file(str(APP), default_timeout=180)


def _served(saved_model: Path, context: str, question: str, options: list[str]) -> np.ndarray:
    model = tf.saved_model.load(str(saved_model))
    out = model.signatures["serving_default"](
        context=tf.constant([context]),
        question=tf.constant([question]),
        options=tf.constant([options]),
    )
    return out["probabilities"].numpy()[0]


def test_app_answers_chinese_then_edited_english(app, mc_models):
    app.run()
    assert not app.exception, app.exception
    # The classic Chinese example is shown by default, with one row per option.
    table = app.dataframe[0].value
    assert table["option"].tolist()[1] == "他们主要负责AI算法的研究和落地."
    assert abs(table["probability"].sum() - 1) < 1e-3
    assert "Answer:" in app.success[0].value
    assert app.metric[0].label.startswith("Latency")

    # Switch to English, pick the English model, edit the text and use 3 options.
    app.radio[0].set_value("English")
    app.sidebar.selectbox[0].set_value(
        next(o for o in app.sidebar.selectbox[0].options if o.startswith("tiny_en"))
    ).run()
    assert app.text_input[0].value == "Before going out, Anna took her _ ."
    options = ["red", "blue", ("a very long option " * 40).strip()]
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


def test_app_explains_how_to_create_a_model_when_none(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ALBERT_MODELS_DIR", str(tmp_path / "empty"))
    app = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not app.exception
    assert "No exported model found" in app.error[0].value
    assert "python -m albert_tf.finetune --flagfile=configs/finetune_quickstart.flags" in (
        app.code[0].value
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium not installed (Debian: apt-get install -y chromium); "
    "the AppTest tests above still cover the app",
)
def test_app_renders_and_answers_in_headless_chromium(mc_models, tmp_path):
    from websockets.sync.client import connect

    port, debug_port = _free_port(), _free_port()
    env = dict(os.environ, ALBERT_MODELS_DIR=str(mc_models["zh"]["export"].parent))
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(APP),
            "--server.headless=true",
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--browser.gatherUsageStats=false",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    browser = None
    try:
        _wait_http(f"http://127.0.0.1:{port}/_stcore/health", 90)
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={tmp_path / 'profile'}",
                f"--remote-debugging-port={debug_port}",
                "--window-size=1280,1600",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_http(f"http://127.0.0.1:{debug_port}/json/version", 60)
        with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list") as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        with connect(page["webSocketDebuggerUrl"], max_size=None) as ws:
            counter = iter(range(1, 10**6))

            def call(method: str, **params):
                message_id = next(counter)
                ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
                while True:
                    reply = json.loads(ws.recv(timeout=60))
                    if reply.get("id") == message_id:
                        return reply.get("result", {})

            call("Page.enable")
            call("Page.navigate", url=f"http://127.0.0.1:{port}/")
            text, deadline = "", time.time() + 150
            while time.time() < deadline:
                result = call("Runtime.evaluate", expression="document.body.innerText")
                text = result.get("result", {}).get("value", "")
                if "Answer:" in text and "Latency" in text:
                    break
                time.sleep(1)
            time.sleep(1)  # let the chart finish drawing before the screenshot
            shot = call("Page.captureScreenshot", format="png")
        # Saved where ALBERT_SCREENSHOT_DIR says (CI artefacts), else in pytest's tmp dir.
        folder = Path(os.environ.get("ALBERT_SCREENSHOT_DIR", tmp_path))
        folder.mkdir(parents=True, exist_ok=True)
        screenshot = folder / "multiple_choice_app.png"
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        (tmp_path / "page.txt").write_text(text)
        assert "ALBERT multiple choice" in text
        assert "Answer:" in text, text[-2000:]
        assert "他们主要负责AI算法的研究和落地." in text
        assert screenshot.stat().st_size > 10_000
    finally:
        for process in (browser, server):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
