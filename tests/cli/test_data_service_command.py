"""`python -m albert_tf.data_service`: a dispatcher and a worker that serve a dataset."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import tensorflow as tf
from helpers.paths import REPO


def _start(*flags: str) -> tuple[subprocess.Popen, str]:
    """Starts the command and returns it with the first line it prints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "albert_tf.data_service", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    return process, process.stdout.readline()


def test_dispatcher_and_worker_serve_a_dataset():
    dispatcher, line = _start("--dispatcher", "--port=0")
    worker = None
    try:
        match = re.search(r"--data_service=grpc://\S+:(\d+)", line)
        assert match, line
        port = match.group(1)
        worker, line = _start(
            "--worker",
            f"--dispatcher_address=localhost:{port}",
            "--port=0",
            "--worker_address=localhost:%port%",
        )
        assert re.match(r"tf\.data service worker at localhost:\d+, serving", line), line
        ds = tf.data.Dataset.range(10).apply(
            tf.data.experimental.service.distribute("parallel_epochs", f"grpc://localhost:{port}")
        )
        assert sorted(int(x) for x in ds.as_numpy_iterator()) == list(range(10))
    finally:
        for process in (worker, dispatcher):
            if process is not None:
                process.terminate()
                process.wait(timeout=60)
