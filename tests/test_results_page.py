"""docs/results.md is generated from the results JSON the repo keeps: it must be current."""

from __future__ import annotations

import shutil
import subprocess
import sys

from helpers.paths import REPO


def _check(root) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.results_page", "--check"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_results_page_is_what_the_results_json_gives():
    done = _check(REPO)
    assert done.returncode == 0, (
        "docs/results.md is stale: run `python -m bench.results_page`\n" + done.stdout + done.stderr
    )


def test_a_changed_result_makes_the_page_stale(tmp_path):
    # A copy of what the page reads, with one number changed: --check must notice.
    for part in ("bench", "experiments", "docs", "models/exported"):
        source = REPO / part
        if source.exists():
            shutil.copytree(source, tmp_path / part)
    report = tmp_path / "experiments" / "results" / "sentence_task_ablation.json"
    report.write_text(report.read_text(encoding="utf-8").replace("0.516", "0.999"), "utf-8")
    assert _check(tmp_path).returncode == 1
