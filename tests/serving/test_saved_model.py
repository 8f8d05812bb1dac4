"""The exported SavedModel, served by a fresh process that imports only
tensorflow and tensorflow_text: parity with the Keras model, graph ops,
saved_model_cli, bad input, versioned export layout."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import tiny_config

import albert_tf
from albert_tf.serving import export_saved_model, length_buckets, next_version
from albert_tf.tasks.classification.serving import TextClassifierServingModule
from albert_tf.tasks.multiple_choice.data import pack_multiple_choice
from albert_tf.tasks.multiple_choice.serving import MultipleChoiceServingModule
from albert_tf.tokenizers import load_tokenizer

LONG = "The quick brown fox jumps over the lazy dog. " * 223  # ~10,000 characters
CASES = {
    "en": [
        {
            "context": ["The cat sat on the mat.", "Rain fell all day.", "Tom likes apples."],
            "question": ["Where did the cat sit?", "Take an _ with you.", "What does Tom like?"],
            "options": [
                ["on the mat", "in the tree", "", ""],
                ["umbrella", "ice cream", "book", "hat"],
                ["apples", "pears", "plums", ""],
            ],
        },
        {  # long text, mixed scripts and emoji, one option, empty context
            "context": [LONG, "Mixed Ελληνικά, русский, 中文 and emoji 😀🎉👍🏽", ""],
            "question": ["What jumps?", "Which is it? 🤔", ""],
            "options": [["the fox", LONG, ""], ["😀", "Ελληνικά", "中文"], ["only one", "", ""]],
        },
        {  # 10 items x 4 options: run in length buckets; contexts of 0-45 words
            "context": [" ".join(["word"] * (5 * i)) + " end." for i in range(10)],
            "question": [f"Question {i}?" for i in range(10)],
            "options": [
                [f"yes {i}", "" if i % 3 == 0 else "no", "" if i % 2 else "maybe so", ""]
                for i in range(10)
            ],
        },
    ],
    "zh": [
        {
            "context": ["算法组的成员们精通各种AI算法.", "今天下雨了。"],
            "question": ["", "我们应该带什么？"],
            "options": [
                [
                    "成都动物园里的大熊猫人人都想摸一下.",
                    "他们主要负责AI算法的研究和落地.",
                    "我没吃上吉士果.",
                    "你吃饭了吗?",
                ],
                ["雨伞", "冰淇淋", "", ""],
            ],
        },
        {
            "context": ["中文" * 5000, "English and 中文 mixed 😀"],
            "question": ["这是什么？" * 100, "_是什么?"],
            "options": [["汉字", "🎉", ""], ["AI", "ALBERT模型", "表情😀"]],
        },
    ],
}

_SERVE = r"""
import json, sys
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

request = json.load(open(sys.argv[1]))
report = {"ops": {}, "results": {}, "errors": {}}
for lang, spec in request.items():
    # Which ops does the graph use, and who registers them?
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(open(spec["path"] + "/saved_model.pb", "rb").read())
    graph = proto.meta_graphs[0].graph_def
    functions = {f.signature.name for f in graph.library.function}
    ops = {n.op for n in graph.node}
    for f in graph.library.function:
        ops |= {n.op for n in f.node_def}
    ops -= functions
    report["ops"][lang] = {"core": sorted(o for o in ops if op_def_registry.get(o) is not None)}
import tensorflow_text  # noqa: F401  (registers its ops)
for lang, spec in request.items():
    ops = report["ops"][lang]
    proto_ops = set(spec["expected_ops"]) - set(ops["core"])
    ops["tf_text"] = sorted(o for o in proto_ops if op_def_registry.get(o) is not None)
    ops["unregistered"] = sorted(o for o in proto_ops if op_def_registry.get(o) is None)
    model = tf.saved_model.load(spec["path"])
    serve = model.signatures["serving_default"]
    out = []
    for case in spec["cases"]:
        result = serve(context=tf.constant(case["context"]), question=tf.constant(case["question"]),
                       options=tf.constant(case["options"]))
        out.append({k: v.numpy().tolist() for k, v in result.items()})
    ids = spec["ids"]
    result = model.signatures["score_ids"](**{k: tf.constant(v, tf.int32) for k, v in ids.items()})
    out.append({k: v.numpy().tolist() for k, v in result.items()})
    report["results"][lang] = out
    errors = {}
    for name, case in {
        "all_empty": (["c"], ["q"], [["", ""]]),
        "batch_mismatch": (["c", "d"], ["q"], [["a", "b"]]),
    }.items():
        try:
            serve(context=tf.constant(case[0]), question=tf.constant(case[1]),
                  options=tf.constant(case[2]))
            errors[name] = "no error"
        except tf.errors.InvalidArgumentError as err:
            errors[name] = err.message
    report["errors"][lang] = errors
report["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print(json.dumps(report))
"""


def _all_ops(path: Path) -> list[str]:
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((path / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node}
    for f in graph.library.function:
        ops |= {n.op for n in f.node_def}
    return sorted(ops - {f.signature.name for f in graph.library.function})


@functools.cache
def _loaded(model_dir: Path) -> albert_tf.AlbertMultipleChoice:
    return albert_tf.load_task_model(model_dir, "multiple_choice")


def _expected(model_dir: Path, case: dict) -> dict:
    model = _loaded(model_dir)
    packed = pack_multiple_choice(
        load_tokenizer(model_dir / "tokenizer"),
        tf.constant(case["context"]),
        tf.constant(case["question"]),
        tf.constant(case["options"]),
        max_seq_length=96,
        max_qa_length=32,
    )
    inputs = {k: packed[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    logits = model(inputs, training=False).numpy()
    return {"logits": logits, "inputs": {k: v.numpy() for k, v in inputs.items()}}


@pytest.fixture(scope="module")
def served(mc_models, tmp_path_factory):
    request, expected = {}, {}
    for lang, paths in mc_models.items():
        expected[lang] = [_expected(paths["model"], case) for case in CASES[lang]]
        request[lang] = {
            "path": str(paths["saved_model"]),
            "cases": CASES[lang],
            "ids": {k: v.tolist() for k, v in expected[lang][0]["inputs"].items()},
            "expected_ops": _all_ops(paths["saved_model"]),
        }
    request_file = tmp_path_factory.mktemp("serve") / "request.json"
    request_file.write_text(json.dumps(request))
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(request_file)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=request_file.parent,  # not the repo: albert_tf must not be importable by accident
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), expected


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_fresh_process_matches_keras_model(served, mc_models, lang):
    report, expected = served
    assert report["albert_tf_imported"] is False
    results = report["results"][lang]
    # Two graphs of one function: the SavedModel's (frozen LayerNorms fused by
    # oneDNN, attention's inference path, length buckets) and Keras' training
    # graph. They round differently, and each CPU kind differently again.
    rtol = albert_budget(_loaded(mc_models[lang]["model"]).config, 96)
    for case, want, got in zip(CASES[lang], expected[lang], results, strict=False):
        present = np.array([[bool(o) for o in row] for row in case["options"]])
        logits, probs = np.array(got["logits"]), np.array(got["probabilities"])
        assert_normwise_close(logits[present], want["logits"][present], rtol=rtol, what="logits")
        assert (logits[~present] == -1e9).all()
        want_probs = tf.nn.softmax(want["logits"]).numpy() * present
        # softmax moves no probability by more than the largest logit change
        logit_tolerance = rtol * np.abs(want["logits"][present]).max()
        np.testing.assert_allclose(probs, want_probs, rtol=0, atol=logit_tolerance)
        assert np.isfinite(probs).all() and np.isfinite(logits).all()
        # at most 5 float32 terms of magnitude <= 1 rounded: 5u < 1e-6
        np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=0, atol=1e-6)
        assert (probs[~present] == 0).all()
        assert got["prediction"] == want["logits"].argmax(-1).tolist()
    # score_ids on the ids this process packed gives the same answer as text in
    # (another signature, so another graph: the same budget)
    ids_result = results[-1]
    present = np.array([[bool(o) for o in row] for row in CASES[lang][0]["options"]])
    ids_logits, text_logits = np.array(ids_result["logits"]), np.array(results[0]["logits"])
    assert_normwise_close(ids_logits[present], text_logits[present], rtol=rtol, what="ids")
    assert (ids_logits[~present] == -1e9).all()
    # different option counts really did vary the probabilities
    assert np.ptp(np.array(results[0]["probabilities"])[1]) > 1e-2


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_graph_uses_only_core_and_tf_text_ops(served, lang):
    ops = served[0]["ops"][lang]
    assert ops["unregistered"] == []
    assert not set(ops["core"]) & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}
    assert ops["tf_text"], "tokenisation should run on tensorflow-text ops"
    kind_ops = {"en": "SentencepieceOp", "zh": "WordpieceTokenizeWithOffsets"}
    assert kind_ops[lang] in ops["tf_text"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bad_input_fails_with_clear_message(served, lang):
    errors = served[0]["errors"][lang]
    assert "at least one non-empty option" in errors["all_empty"]
    assert "same batch size" in errors["batch_mismatch"]


def test_saved_model_cli_lists_documented_signature(mc_models):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tensorflow.python.tools.saved_model_cli",
            "show",
            "--dir",
            str(mc_models["en"]["saved_model"]),
            "--all",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    text = result.stdout
    block = text.split("signature_def['serving_default']:")[1].split("signature_def[")[0]
    for name, dtype, shape in [
        ("context", "DT_STRING", "(-1)"),
        ("question", "DT_STRING", "(-1)"),
        ("options", "DT_STRING", "(-1, -1)"),
        ("probabilities", "DT_FLOAT", "(-1, -1)"),
        ("logits", "DT_FLOAT", "(-1, -1)"),
        ("prediction", "DT_INT64", "(-1)"),
    ]:
        entry = block.split(f"['{name}'] tensor_info:")[1]
        assert f"dtype: {dtype}" in entry.split("name:")[0]
        assert f"shape: {shape}" in entry.split("name:")[0]
    assert "signature_def['score_ids']" in text and "signature_def['tokenize']" in text


def test_export_layout_versions_and_errors(mc_models, tmp_path):
    saved = mc_models["zh"]["saved_model"]
    assert (saved / "assets" / "vocab.txt").is_file()  # the WordPiece table's asset
    meta = json.loads((saved / "assets.extra" / "albert_tf.json").read_text())
    assert meta["max_seq_length"] == 96 and meta["max_qa_length"] == 32
    assert (mc_models["en"]["saved_model"] / "assets.extra/tokenizer/spiece.model").is_file()
    assert next_version(mc_models["zh"]["export"]) == 2
    with pytest.raises(FileExistsError, match="exists"):
        export_saved_model(mc_models["zh"]["model"], mc_models["zh"]["export"], version=1)
    with pytest.raises(FileNotFoundError, match="no tokenizer"):
        export_saved_model(
            mc_models["zh"]["model"], tmp_path / "x", tokenizer_dir=tmp_path / "missing"
        )
    with pytest.raises(FileNotFoundError, match="not an albert_tf model directory"):
        export_saved_model(
            tmp_path, tmp_path / "x", tokenizer_dir=mc_models["zh"]["model"] / "tokenizer"
        )
    with pytest.raises(ValueError, match="wrong tokenizer"):
        export_saved_model(
            mc_models["zh"]["model"],
            tmp_path / "x",
            tokenizer_dir=mc_models["en"]["model"] / "tokenizer",
        )


def test_export_has_only_stock_ops(mc_models):
    # TF Serving has no albert_tf kernels: an export made where the trainers
    # choose them (this CPU builds them) must not contain them. The shared
    # tiny export is one, made by export_saved_model in this session.
    from tensorflow.core.protobuf import saved_model_pb2

    from albert_tf.layers.implementations import choose_implementation

    assert choose_implementation(accelerator=False, jit_compile=False, fused_kernels=True) == (
        "fused_cpu"
    )
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((mc_models["en"]["saved_model"] / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node}
    for function in graph.library.function:
        ops.update(n.op for n in function.node_def)
    assert "BatchMatMulV2" in ops or "MatMul" in ops  # the encoder is in there
    assert not {op for op in ops if op.startswith("Albert")}


def test_export_holds_one_encoder_per_scoring_signature(mc_models):
    # Length buckets call the encoder from four places and the one-batch branch from a
    # fifth; inlined, each was a copy of the encoder graph in saved_model.pb (6.7 MB
    # for 3.1 MB of weights in the shipped demo). Shared, serving_default and
    # score_ids hold one call each.
    from tensorflow.core.protobuf import saved_model_pb2

    model_dir = mc_models["en"]["model"]
    layers = albert_tf.AlbertConfig.from_json(str(model_dir / "config.json")).num_hidden_layers
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((mc_models["en"]["saved_model"] / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    # Attention multiplies twice per applied layer: QK^T, then the probabilities by V.
    batch_matmuls = sum(n.op == "BatchMatMulV2" for n in nodes)
    assert batch_matmuls == 2 * layers * 2


def _varied_lengths(rng, shape, width):
    """Packed ids of the given leading shape, real pieces first, lengths 3..width."""
    lengths = rng.randint(3, width + 1, shape)
    lengths.reshape(-1)[rng.rand(lengths.size) < 0.2] = width  # some as long as the batch
    mask = (np.arange(width) < lengths[..., None]).astype("int32")
    ids = rng.randint(5, 100, mask.shape).astype("int32") * mask
    segments = (np.arange(width) >= lengths[..., None] // 2).astype("int32") * mask
    return lengths, {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


def test_length_buckets_give_the_logits_of_one_padded_batch():
    model = albert_tf.AlbertMultipleChoice.from_albert_config(tiny_config())
    module = MultipleChoiceServingModule(model, None, max_seq_length=64, max_qa_length=32)
    lengths, packed = _varied_lengths(np.random.RandomState(0), (10, 4), 40)
    # Absent options (all-padding rows) fill the first bucket and part of the second.
    lengths[:, 2:] = lengths[0, 1] = 0
    packed["padding_mask"] *= (lengths > 0)[..., None]
    want = model(packed, training=False).numpy()  # one call on [10, 4, 40]
    assert length_buckets.FROM_SEQUENCES <= 10 * 4

    def one_option_each(rows):
        return model({k: v[:, None] for k, v in rows.items()}, training=False)[:, 0]

    flat = {k: tf.constant(v.reshape(-1, 40)) for k, v in packed.items()}
    bucketed = tf.function(lambda p: length_buckets.in_buckets(one_option_each, p))(flat)
    served = tf.function(module._logits)(*(tf.constant(packed[k]) for k in packed))
    present = lengths > 0
    # Other batch shapes: oneDNN blocks (and so sums) them differently.
    rtol = albert_budget(model.config, 40)
    for got in (np.reshape(bucketed, (10, 4)), served.numpy()):
        assert_normwise_close(got[present], want[present], rtol=rtol)
        assert (got[~present] == -1e9).all()


def test_classifier_length_buckets_give_the_logits_of_one_padded_batch():
    model = albert_tf.AlbertTextClassifier.from_albert_config(tiny_config(), num_labels=3)
    module = TextClassifierServingModule(model, None, 64, label_names=["a", "b", "c"])
    _, packed = _varied_lengths(np.random.RandomState(1), (40,), 50)  # 40 texts: bucketed
    logits = model(packed, training=False).numpy()
    got = tf.function(module._score)(*(tf.constant(packed[k]) for k in packed))
    # Probabilities move by at most the largest logit change (a budget of the logits).
    atol = albert_budget(model.config, 50) * np.abs(logits).max()
    np.testing.assert_allclose(
        got["probabilities"].numpy(), tf.nn.softmax(logits).numpy(), rtol=0, atol=atol
    )
