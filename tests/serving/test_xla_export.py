"""``export --jit_compile``: the forward pass XLA-compiled, served by a fresh process with
only tensorflow + tensorflow_text, with the answers of the ordinary export.

The models are the shipped classifier and span QA model (tiny), recovered from their
exports: a per-text head and a per-piece one, whose outputs the compiled model's
padding must leave unchanged."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.checkpoints.saved_format import read_config
from albert_tf.serving import export_saved_model
from albert_tf.serving.export import padded_batch, padded_length
from albert_tf.serving.recovery import recover_checkpoint

REPO = Path(__file__).resolve().parents[2]
SHIPPED = {
    "classification": ("albert_reviews_zh/1", "albert_tiny_zh_peoples_daily", {"num_labels": 2}),
    "span_qa": ("albert_qa_en_pico/1", "albert_tiny_en_books_pubmed", {}),
}
ABSTRACT = (
    "We enrolled adults aged 65 years or older with chronic heart failure who had been "
    "admitted to hospital in the previous year. Participants were randomly assigned to "
    "colchicine or placebo for 52 weeks. The primary outcome was the symptom score. "
)
REQUESTS = {
    # Lengths and batch sizes that the padding rounds differently.
    "classification": [
        {"text": ["很好用"], "text_pair": [""]},
        {"text": ["质量很差，用了三天就坏了。" * 4, "物流很快", "一般"], "text_pair": ["", "", ""]},
    ],
    "span_qa": [
        {"question": ["Who were the participants of this study?"], "context": [ABSTRACT]},
        {
            "question": ["Who were the participants of this study?"] * 3,
            "context": [ABSTRACT * 3, ABSTRACT, "Women aged 50 to 80 years took part."],
        },
    ],
}
_SERVE = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
request = json.load(open(sys.argv[1]))
out = {}
for name, path in request["paths"].items():
    fn = tf.saved_model.load(path).signatures["serving_default"]
    out[name] = [
        {k: v.numpy().tolist() for k, v in fn(**{k: tf.constant(v) for k, v in r.items()}).items()
         if v.dtype != tf.string}
        for r in request["requests"]
    ]
print(json.dumps({"albert_tf_imported": "albert_tf" in sys.modules, "outputs": out}))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.mktemp("xla")
    paths = {}
    for task, (shipped, pretrained, head) in SHIPPED.items():
        fields = dataclasses.asdict(read_config(REPO / "models" / "pretrained" / pretrained))
        checkpoint = base / task / "checkpoint"
        recover_checkpoint(
            REPO / "models" / "exported" / shipped, checkpoint, head_arguments=head, **fields
        )
        paths[task] = {
            "plain": export_saved_model(checkpoint, base / task / "plain", version=1),
            "xla": export_saved_model(checkpoint, base / task / "xla", version=1, jit_compile=True),
        }
        paths[task]["checkpoint"] = str(checkpoint)
    return base, paths


def _serve(base: Path, paths: dict, requests: list) -> dict:
    request = base / "request.json"
    request.write_text(json.dumps({"paths": paths, "requests": requests}))
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(request)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=base,  # not the repo: albert_tf must not be importable by accident
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("task", sorted(SHIPPED))
def test_fresh_process_serves_the_compiled_export_alike(exported, task):
    base, paths = exported
    models = {k: v for k, v in paths[task].items() if k != "checkpoint"}
    report = _serve(base, models, REQUESTS[task])
    assert report["albert_tf_imported"] is False
    for plain, xla in zip(report["outputs"]["plain"], report["outputs"]["xla"], strict=True):
        assert plain.keys() == xla.keys()
        for key in plain:
            if key in ("probabilities", "score"):
                np.testing.assert_allclose(xla[key], plain[key], atol=2e-5, err_msg=key)
            else:  # labels' indices, answers' characters
                assert xla[key] == plain[key], key


def test_compiled_export_is_marked_for_xla(exported):
    _, paths = exported
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(paths["classification"]["xla"]) / "saved_model.pb").read_bytes())
    compiled = [
        f.signature.name
        for f in proto.meta_graphs[0].graph_def.library.function
        if f.attr["_XlaMustCompile"].b
    ]
    assert compiled, "no function of the export carries _XlaMustCompile"
    metadata = Path(paths["classification"]["xla"]) / "assets.extra" / "albert_tf.json"
    assert json.loads(metadata.read_text())["jit_compile"] is True


def test_command_exports_compiled_and_refuses_int8(exported, tmp_path):
    _, paths = exported
    checkpoint = paths["classification"]["checkpoint"]
    command = [sys.executable, "-m", "albert_tf.export", f"--checkpoint={checkpoint}"]
    command += [f"--export_dir={tmp_path / 'bf16'}", "--serving_precision=bfloat16"]
    result = subprocess.run(
        command + ["--jit_compile"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "exported SavedModel (bfloat16, XLA-compiled)" in result.stdout
    with pytest.raises(ValueError, match="int8"):
        export_saved_model(
            checkpoint, tmp_path / "int8", serving_precision="int8", jit_compile=True
        )


def test_padding_bounds_the_shapes_xla_compiles():
    lengths = {int(padded_length(tf.constant(n), 512)) for n in range(1, 513)}
    assert lengths == set(range(32, 513, 32))
    batches = {int(padded_batch(tf.constant(n))) for n in range(1, 257)}
    assert batches == {1, 2, 4, 8, 16, 32, *range(64, 257, 32)}
    assert all(int(padded_batch(tf.constant(n))) >= n for n in range(1, 300))
