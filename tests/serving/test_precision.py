"""Serving precisions: the int8 projection against integer arithmetic done in
numpy, quantisation that keeps the model's sharing, and bfloat16 / int8
SavedModels served by a fresh process with only tensorflow + tensorflow_text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import albert_budget, assert_normwise_close, int8_skip_reason
from helpers.testing_utils import tiny_config

import albert_tf
from albert_tf.hardware import onednn_runs
from albert_tf.layers.bfloat16_linear import Bfloat16Linear
from albert_tf.layers.int8_linear import INT8_MATMUL_OP, Int8Linear
from albert_tf.serving import export_saved_model
from albert_tf.serving.precision import precision_warning, to_serving_precision
from albert_tf.tasks.multiple_choice.data import pack_multiple_choice
from albert_tf.tokenizers import load_tokenizer

INT8_RUNS = onednn_runs("int8")
needs_int8 = pytest.mark.skipif(int8_skip_reason() is not None, reason=str(int8_skip_reason()))


def _numpy_int8_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The documented scheme in integers: per-column symmetric int8 weights,
    the input shifted by min(x, 0) and coded in 0..255 over the tensor's range."""
    scale = np.maximum(np.abs(w).max(0), 1e-12) / 127.0
    wq = np.clip(np.round(w / scale), -127, 127).astype(np.int64)
    low = min(x.min(), 0.0)
    span = max(max(x.max(), 0.0) - low, 1e-12)
    codes = np.round((x - low) * (255.0 / span)).astype(np.int64)
    acc = codes @ wq  # exact
    # codes ≈ (x - low) · 255/span and wq ≈ w / scale, so x @ w ≈ acc · span/255 · scale + low · Σw.
    return acc * (span / 255.0) * scale + low * (wq.sum(0) * scale) + b


@needs_int8
@pytest.mark.parametrize("shift", [0.0, 3.0, -2.0])
def test_int8_linear_equals_integer_arithmetic(shift):
    rng = np.random.RandomState(1)
    w = rng.randn(48, 20).astype("float32") * np.linspace(0.01, 1, 20, dtype="float32")
    b = rng.randn(20).astype("float32")
    x = (rng.randn(2, 7, 48) + shift).astype("float32")
    got = Int8Linear(w, b)(tf.constant(x)).numpy()
    assert got.shape == (2, 7, 20)
    want = _numpy_int8_linear(x.reshape(-1, 48).astype(np.float64), w, b).reshape(2, 7, 20)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # and it is a close approximation of the float product
    exact = x @ w + b
    assert np.abs(got - exact).max() < 0.02 * np.abs(exact).max()


@needs_int8
@pytest.mark.parametrize("value", [0.0, 2.5, -1.5])
def test_int8_linear_of_a_constant_input(value):
    # A one-value tensor has an empty range; the quantiser widens it, nothing divides by 0.
    rng = np.random.RandomState(3)
    w, b = rng.randn(48, 20).astype("float32"), rng.randn(20).astype("float32")
    x = np.full((3, 48), value, "float32")
    got = Int8Linear(w, b)(tf.constant(x)).numpy()
    exact = x @ w + b
    assert np.isfinite(got).all()
    assert np.abs(got - exact).max() < 0.02 * np.abs(exact).max()


@pytest.mark.skipif(INT8_RUNS, reason="this CPU runs TensorFlow's int8 matmul")
def test_int8_on_a_cpu_without_int8_kernels_says_why():
    # Eagerly the op returns an empty tensor on such CPUs, and the layer names the
    # reason; in a graph (a SavedModel) the kernel sets no output and the runtime
    # names the op. Either way an error, never a wrong answer.
    rng = np.random.RandomState(4)
    layer = Int8Linear(rng.randn(16, 8).astype("float32"))
    x = tf.constant(rng.randn(3, 16).astype("float32"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not run on this CPU"):
        layer(x)
    graph = tf.function(layer, input_signature=[tf.TensorSpec([None, 16], tf.float32)])
    with pytest.raises(tf.errors.OpError, match=f"Missing 0-th output from .*{INT8_MATMUL_OP}"):
        graph(x)
    assert "does not run on this CPU" in precision_warning("int8")


def test_bfloat16_linear_rounds_only_the_product():
    import ml_dtypes  # numpy's bfloat16, independent of TensorFlow's cast

    rng = np.random.RandomState(2)
    w, b = rng.randn(32, 12).astype("float32"), rng.randn(12).astype("float32")
    x = rng.randn(5, 32).astype("float32")
    got = Bfloat16Linear(w, b)(tf.constant(x)).numpy()
    as_bf16 = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    product = (as_bf16(x) @ as_bf16(w)).astype(ml_dtypes.bfloat16).astype(np.float64)
    # bfloat16 output of the matmul (accumulation order may differ by an ulp), float32 bias
    np.testing.assert_allclose(got, product + b, rtol=2**-7, atol=1e-2)
    assert got.dtype == np.float32


def test_int8_names_its_attention_choices():
    model = albert_tf.AlbertMultipleChoice.from_albert_config(tiny_config())
    with pytest.raises(ValueError, match="'bfloat16', 'float32' or 'auto'"):
        to_serving_precision(model, "int8", int8_attention="int4")
    with pytest.raises(ValueError, match="use one of"):
        to_serving_precision(model, "int4")
    served = to_serving_precision(model, "int8")  # "auto" follows this CPU
    expected = "bfloat16" if precision_warning("bfloat16") is None else "float32"
    assert served.blocks == {"attention": expected, "feedforward": "int8"}


def test_precision_warning_follows_cpu_flags():
    assert precision_warning("float32", flags=set()) is None
    assert precision_warning("int8", flags={"avx512f", "avx512_vnni"}) is None
    # AVX-512 without VNNI: runs, slowly; AVX2 only (AMD Zen 1-3): does not run at all
    assert "avx512_vnni" in precision_warning("int8", flags={"avx2", "avx512f", "avx512_bf16"})
    assert "does not run on this CPU" in precision_warning("int8", flags={"avx2", "fma"})
    assert "avx512_bf16" in precision_warning("bfloat16", flags={"avx2", "avx512_vnni"})
    with pytest.raises(ValueError, match="use one of"):
        precision_warning("float8", flags=set())


REPLACEMENTS = {  # name: (precision, int8_attention, projections replaced per distinct layer)
    "bfloat16": ("bfloat16", "auto", 4),
    "int8": ("int8", "bfloat16", 4),
    "int8_float32_attention": ("int8", "float32", 2),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[needs_int8] if "int8" in n else []) for n in REPLACEMENTS]
)
@pytest.mark.parametrize("sharing, layers", [("all", 1), ("none", 2)])
def test_replaced_projections_keep_sharing_and_stay_close(name, sharing, layers):
    precision, int8_attention, per_layer = REPLACEMENTS[name]
    config = tiny_config(num_hidden_layers=2, share=sharing)
    model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    rng = np.random.RandomState(0)
    inputs = {
        "token_ids": rng.randint(5, config.vocab_size, (2, 3, 12)).astype("int32"),
        "segment_ids": np.zeros((2, 3, 12), "int32"),
        "padding_mask": np.ones((2, 3, 12), "int32"),
    }
    before = model(inputs, training=False).numpy()
    # The same rewrite in float32 (frozen LayerNorms, projections as trained): what
    # the lower precision must differ from, if its projections really ran.
    frozen = to_serving_precision(model, "float32").model(inputs, training=False).numpy()
    served = to_serving_precision(model, precision, int8_attention=int8_attention)
    # up to 4 projections (q/k/v fused, attention output, 2 feed-forward) per *distinct* layer
    assert len(served.projections) == per_layer * layers
    after = served.model(inputs, training=False).numpy()
    assert not np.array_equal(frozen, after)  # the replaced path really ran
    np.testing.assert_allclose(after, before, atol=0.05 * np.abs(before).max())
    # A rewrite, not a patch: the given model computes exactly as before.
    assert served.model is not model
    np.testing.assert_array_equal(model(inputs, training=False).numpy(), before)


def test_float32_serving_model_is_a_frozen_clone_with_the_same_logits():
    config = tiny_config(num_hidden_layers=2, share="all")
    model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    inputs = {
        "token_ids": np.random.RandomState(1).randint(5, config.vocab_size, (2, 3, 12)),
        "segment_ids": np.zeros((2, 3, 12), "int32"),
        "padding_mask": np.ones((2, 3, 12), "int32"),
    }
    served = to_serving_precision(model, "float32")
    assert served.projections == () and served.model is not model
    assert [w.path for w in served.model.weights] == [w.path for w in model.weights]
    # Frozen LayerNorms normalise c·x with epsilon c²·eps: the same function, rounded anew.
    assert_normwise_close(
        served.model(inputs, training=False),
        model(inputs, training=False),
        rtol=albert_budget(config, 12),
        what="frozen clone",
    )


_SERVE = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import op_def_registry
from tensorflow.python.util import _pywrap_util_port

request = json.load(open(sys.argv[1]))
report = {}
for name, path in request["paths"].items():
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(open(path + "/saved_model.pb", "rb").read())
    graph = proto.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node}
    dtypes = set()
    for f in graph.library.function:
        for n in f.node_def:
            ops.add(n.op)
            if n.op in ("MatMul", "BatchMatMulV2", "BatchMatMulV3") and "T" in n.attr:
                dtypes.add(tf.dtypes.as_dtype(n.attr["T"].type).name)
    ops -= {f.signature.name for f in graph.library.function}
    serve = tf.saved_model.load(path).signatures["serving_default"]
    c = request["case"]
    context.enable_run_metadata()  # which ops the runtime runs after its rewrites
    context.export_run_metadata()
    try:
        out = serve(context=tf.constant(c["context"]), question=tf.constant(c["question"]),
                    options=tf.constant(c["options"]))
        probabilities, error = out["probabilities"].numpy().tolist(), None
    except tf.errors.OpError as e:  # int8 on a CPU whose TF has no int8 kernel
        probabilities, error = None, e.message
    ran = {n.op for g in context.export_run_metadata().function_graphs
           for p in g.partition_graphs for n in p.node}
    context.disable_run_metadata()
    report[name] = {
        "unregistered": sorted(o for o in ops if op_def_registry.get(o) is None),
        "has_int8_matmul": request["int8_op"] in ops,
        "matmul_dtypes": sorted(dtypes),
        "probabilities": probabilities,
        "error": error,
        "metadata": json.load(open(path + "/assets.extra/albert_tf.json")),
        "ran": sorted(ran),
        "onednn": bool(_pywrap_util_port.IsMklEnabled()),
    }
report["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print(json.dumps(report))
"""

CASE = {
    "context": ["The cat sat on the mat.", "Rain fell all day long.", "Tom likes apples."],
    "question": ["Where did the cat sit?", "Take an _ with you.", "What does Tom like?"],
    "options": [
        ["on the mat", "in the tree", "", ""],
        ["umbrella", "ice cream", "book", "hat"],
        ["apples", "pears", "plums", ""],
    ],
}


def _with_trained_like_layer_norms(model_dir: Path, out: Path) -> Path:
    """A copy of the test model whose LayerNorms are not at their initial gamma 1,
    beta 0 (Grappler drops a multiply by ones, so untrained ones never fuse)."""
    from albert_tf.checkpoints.saved_format import load_task_model
    from albert_tf.layers.layer_norm import AlbertLayerNormalization

    model = load_task_model(model_dir, "multiple_choice")
    rng = np.random.RandomState(5)
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, AlbertLayerNormalization):
            # a small spread: the model's answers stay those of the shared test model
            layer.gamma.assign(rng.normal(1, 0.02, layer.gamma.shape).astype("float32"))
            layer.beta.assign(rng.normal(0, 0.02, layer.beta.shape).astype("float32"))
    albert_tf.save_model(model, out, tokenizer=load_tokenizer(Path(model_dir) / "tokenizer"))
    (out / "finetune.json").write_text((Path(model_dir) / "finetune.json").read_text())
    return out


@pytest.fixture(scope="module")
def exported(mc_models, tmp_path_factory):
    base = tmp_path_factory.mktemp("precision")
    model_dir = _with_trained_like_layer_norms(mc_models["en"]["model"], base / "model")
    # bfloat16 through the library, int8 through the command.
    paths = {
        "bfloat16": export_saved_model(
            model_dir, base / "bfloat16", version=1, serving_precision="bfloat16"
        )
    }
    command = [sys.executable, "-m", "albert_tf.export", f"--checkpoint={model_dir}"]
    command += [f"--export_dir={base / 'int8'}", "--serving_precision=int8"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"exported SavedModel (int8): {base / 'int8' / '1'}" in result.stdout
    paths["int8"] = str(base / "int8" / "1")
    request = base / "request.json"
    request.write_text(json.dumps({"paths": paths, "case": CASE, "int8_op": INT8_MATMUL_OP}))
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(request)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=base,  # not the repo: albert_tf must not be importable by accident
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # References: the Keras model on the same packing, as trained (float32) and
    # with each precision's projections, whose arithmetic the tests above check.
    packed = pack_multiple_choice(
        load_tokenizer(Path(model_dir) / "tokenizer"),
        *(tf.constant(CASE[k]) for k in ("context", "question", "options")),
        max_seq_length=96,
        max_qa_length=32,
    )
    inputs = {k: packed[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    present = np.array([[bool(o) for o in row] for row in CASE["options"]])
    reference = {}
    for precision in ["float32", "bfloat16", *(["int8"] if INT8_RUNS else [])]:
        model = albert_tf.load_task_model(model_dir, "multiple_choice")
        if precision != "float32":
            model = to_serving_precision(model, precision).model
        reference[precision] = tf.nn.softmax(model(inputs)).numpy() * present
    return report, reference


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_lower_precision_saved_model_serves_in_fresh_process(exported, precision):
    report, reference = exported
    assert report["albert_tf_imported"] is False
    got = report[precision]
    assert got["unregistered"] == []
    assert got["metadata"]["serving_precision"] == precision
    if precision == "int8" and not INT8_RUNS:
        # It loads, and fails rather than answer wrongly: in a graph the kernel leaves
        # its output unset, and the runtime names the op (docs/serving.md, "Precision").
        assert "Missing 0-th output" in got["error"] and INT8_MATMUL_OP in got["error"]
        return
    if precision == "int8" and int8_skip_reason():
        pytest.skip(int8_skip_reason())
    assert got["error"] is None, got["error"]
    probs = np.array(got["probabilities"])
    # the served graph computes what the replaced Keras model does ...
    np.testing.assert_allclose(probs, reference[precision], atol=1e-4)
    # ... which differs from float32, but not in its answers here. (This tiny
    # model's large random weights make sharp logits that lower precisions move
    # by up to ~0.06; bench/serving_fidelity.py measures pretrained models.)
    assert not np.array_equal(probs, reference["float32"])
    np.testing.assert_allclose(probs, reference["float32"], atol=0.1)
    assert (probs.argmax(-1) == reference["float32"].argmax(-1)).all()


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_saved_model_runs_fused_layer_norm_and_attention_scores(exported, precision):
    # The export freezes LayerNorms and attention takes its inference path so
    # that oneDNN's rewrites fuse them in the server (LayerNorm weights off their
    # initial values, as a trained model's are: `_with_trained_like_layer_norms`).
    report, _ = exported
    got = report[precision]
    if not got["onednn"]:
        pytest.skip("this TensorFlow has no oneDNN rewrites")
    if got["error"]:
        pytest.skip(f"the {precision} model does not run on this CPU: {got['error']}")
    fused = {"_MklLayerNorm", "_MklFusedBatchMatMulV2"}
    unfused = {"Rsqrt", "SquaredDifference"}
    assert fused <= set(got["ran"]) and not unfused & set(got["ran"]), [
        op for op in got["ran"] if op in fused | unfused or op.startswith("_Mkl")
    ]


def test_int8_and_bfloat16_graphs_use_their_kernels(exported):
    report, _ = exported
    assert report["int8"]["has_int8_matmul"]
    assert not report["bfloat16"]["has_int8_matmul"]
    # the projections in bfloat16; attention scores stay float32 in both
    assert report["bfloat16"]["matmul_dtypes"] == ["bfloat16", "float32"]
    blocks = report["int8"]["metadata"]["projection_precision"]
    assert blocks["feedforward"] == "int8"
    want = ["bfloat16", "float32"] if blocks["attention"] == "bfloat16" else ["float32"]
    assert report["int8"]["matmul_dtypes"] == want
