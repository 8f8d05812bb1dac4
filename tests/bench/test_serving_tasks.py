"""``python -m bench.serving --tasks=...`` end to end in its smoke mode (the shipped
classifier recovered, exported and timed against the Hugging Face pipeline), the
ONNX Runtime variant's plumbing with a stand-in session (ONNX Runtime is the
``bench`` extra's), and how answers are compared."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from helpers.paths import REPO

sys.path.insert(0, str(REPO))  # the bench package lives beside albert_tf

from bench.serving.tasks import peers  # noqa: E402
from bench.serving.tasks.answers import agreement, pipeline_answers  # noqa: E402


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("serving_tasks")
    output = workdir / "report.json"
    command = [sys.executable, "-m", "bench.serving", "--tasks=classification", "--smoke"]
    command += ["--variants=savedmodel,hf", f"--workdir={workdir}", f"--output={output}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    return workdir, json.loads(output.read_text())


def test_smoke_run_times_both_variants_and_compares_answers(smoke):
    _, report = smoke
    assert report["command"][:3] == ["python", "-m", "bench.serving"]
    results = report["results"]["classification"]
    assert sorted(results) == ["batch1", "batch32"]
    for workload, count in (("batch1", 1), ("batch32", 32)):
        for variant in ("savedmodel", "hf"):
            r = results[workload][variant]
            assert r["median_s"] > 0 and r["p90_s"] >= r["median_s"], (workload, variant)
            assert r["peak_rss_mb"] > 0 and r["requests_per_s"] > 0
            assert len(r["answers"]) == count
            assert r["agreement"]["of"] == count
        # Our reference agrees with itself; the SavedModel ran without albert_tf.
        assert results[workload]["savedmodel"]["agreement"]["same"] == count
        assert results[workload]["savedmodel"]["albert_tf_imported"] is False
    assert "hf_over_savedmodel" in report["summary"]["classification"]["batch32"]


class _TorchSession:
    """ONNX Runtime's `InferenceSession` as the pipelines use it, answered by torch."""

    def __init__(self, model, outputs):
        self.model, self.names = model, outputs

    def get_outputs(self):
        return [SimpleNamespace(name=n) for n in self.names]

    def get_inputs(self):
        return [SimpleNamespace(name=n) for n in peers.ONNX_INPUTS]

    def run(self, names, feed):
        import torch

        with torch.inference_mode():
            out = self.model(**{k: torch.from_numpy(v) for k, v in feed.items()})
        return [out[n].numpy() for n in names]


def test_ort_forward_inside_the_pipeline_answers_as_the_pipeline(smoke):
    workdir, report = smoke
    args = argparse.Namespace(
        workdir=str(workdir),
        task="classification",
        workload="batch32",
        hf_batch_size=32,
        warmup=1,
        repeats=1,
    )
    tokenizer = peers.hf_tokenizer(args.workdir, args.task)
    model = peers.hf_model(args.workdir, args.task, "eager")
    pipe = peers.build_pipeline(args, model, tokenizer)
    session = _TorchSession(model, peers.onnx_outputs(args.task))
    pipe.model = peers.OrtForward(session, model.config)
    got = peers.measure_pipeline(args, pipe, tokenizer, {})
    assert got["answers"] == report["results"]["classification"]["batch32"]["hf"]["answers"]


def test_answers_of_pipelines_and_their_agreement():
    one_question = {"score": 0.5, "start": 3, "end": 9, "answer": "abcdef"}
    assert pipeline_answers("span_qa", one_question) == [[3, 9]]
    entity = {"entity_group": "PER", "start": 0, "end": 2, "score": 0.9, "word": "李鹏"}
    assert pipeline_answers("tagging", [entity]) == [[[0, 2, "PER"]]]  # one text
    assert pipeline_answers("tagging", []) == [[]]  # one text, no entity
    assert pipeline_answers("tagging", [[entity], []]) == [[[0, 2, "PER"]], []]
    labels = [{"label": "1", "score": 0.9}, [{"label": "0", "score": 0.6}]]
    assert pipeline_answers("classification", labels) == ["1", "0"]
    ours = [[[0, 2, "PER"], [5, 7, "LOC"]], []]
    theirs = [[[0, 2, "PER"]], []]
    assert agreement(theirs, ours) == {
        "same": 1,
        "of": 2,
        "entities": {"both": 1, "ours": 2, "theirs": 1},
    }
