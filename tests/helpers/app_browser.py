"""The real app in a real browser: `streamlit run apps/app.py` and headless Chromium driven
over the DevTools protocol (no Selenium, no mocks). The tests of tests/apps/ use it."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_REASON = (
    "chromium not installed (Debian: apt-get install -y chromium); "
    "the AppTest tests still cover the app"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


class Page:
    """One Chromium tab on the app: navigate, wait for text, click, screenshot."""

    def __init__(self, ws, port: int):
        self._ws, self._port = ws, port
        self._ids = iter(range(1, 10**6))

    def call(self, method: str, **params) -> dict:
        message_id = next(self._ids)
        self._ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == message_id:
                return reply.get("result", {})

    def open(self, path: str = "/") -> None:
        self.call("Page.navigate", url=f"http://127.0.0.1:{self._port}{path}")

    def text(self) -> str:
        result = self.call("Runtime.evaluate", expression="document.body.innerText")
        return result.get("result", {}).get("value", "")

    def wait_for(self, *needles: str, timeout: float = 150) -> str:
        """The page's text once it holds every needle (or at the timeout)."""
        text, deadline = "", time.time() + timeout
        while time.time() < deadline:
            text = self.text()
            if all(n in text for n in needles):
                break
            time.sleep(1)
        time.sleep(1)  # let the chart finish drawing before a screenshot
        return text

    def click_label(self, label: str) -> None:
        self.call(
            "Runtime.evaluate",
            expression="[...document.querySelectorAll('label')]"
            f".find(l => l.innerText.trim() === {json.dumps(label)}).click()",
        )

    def click_link(self, text: str) -> None:
        """Follows the link whose text is ``text``, as a visitor clicks it (the sidebar's
        page navigation, say)."""
        found = self.call(
            "Runtime.evaluate",
            expression="[...document.querySelectorAll('a')]"
            f".find(a => a.innerText.trim() === {json.dumps(text)}).click()",
        )
        if "exceptionDetails" in found:
            raise LookupError(f"no link {text!r} on the page: {found}")

    def type_into(self, label: str, text: str) -> None:
        """Replaces the text of the field labelled ``label`` as a visitor would: focus,
        select all, type (``Input.insertText``), then leave the field, which is when
        Streamlit sends a text area's value."""
        found = self.call(
            "Runtime.evaluate",
            expression=f"(() => {{ const f = document.querySelector("
            f"'[aria-label=' + JSON.stringify({json.dumps(label)}) + ']');"
            " f.focus(); f.select(); })()",
        )
        if "exceptionDetails" in found:  # no such field: typing would go elsewhere
            raise LookupError(f"no field labelled {label!r} on the page: {found}")
        self.call("Input.insertText", text=text)
        self.call("Runtime.evaluate", expression="document.activeElement.blur()")

    def field_value(self, label: str) -> str:
        """The current text of the field labelled ``label``."""
        result = self.call(
            "Runtime.evaluate",
            expression=f"document.querySelector('[aria-label=' + "
            f"JSON.stringify({json.dumps(label)}) + ']').value",
        )
        return result.get("result", {}).get("value", "")

    def screenshot(self, path: Path) -> Path:
        shot = self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


def screenshot_dir(tmp_path: Path) -> Path:
    """Where ALBERT_SCREENSHOT_DIR says (CI artefacts), else pytest's tmp dir."""
    folder = Path(os.environ.get("ALBERT_SCREENSHOT_DIR", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def app_in_chromium(app: Path, models_dir: Path, tmp_path: Path) -> Iterator[Page]:
    """``streamlit run app`` on a free port with ``ALBERT_MODELS_DIR=models_dir``, and a
    headless Chromium tab on it; both are stopped on exit."""
    from websockets.sync.client import connect

    port, debug_port = free_port(), free_port()
    env = dict(os.environ, ALBERT_MODELS_DIR=str(models_dir))
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(app),
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
        wait_http(f"http://127.0.0.1:{port}/_stcore/health", 90)
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
        wait_http(f"http://127.0.0.1:{debug_port}/json/version", 60)
        with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list") as r:
            tab = next(t for t in json.load(r) if t["type"] == "page")
        with connect(tab["webSocketDebuggerUrl"], max_size=None) as ws:
            page = Page(ws, port)
            page.call("Page.enable")
            yield page
    finally:
        for process in (browser, server):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
