"""Helpers shared by the tests (importable thanks to pytest's pythonpath)."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import pathlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import keras


#: A folder of builds made before (tests/test_cpu_kinds.py hands its nested pass the
#: parent run's: they hold no arithmetic that the instruction set changes).
BUILDS_ENV = "ALBERT_TF_TEST_BUILDS"


@contextlib.contextmanager
def build_lock(root: pathlib.Path, name: str) -> Iterator[None]:
    """One builder of ``name`` at a time across processes (pytest-xdist workers, a
    nested pass); the others then find its result: the builders skip what a
    ``done`` marker says is there. One lock per build (each writes only its own
    folder ``root/name``), so two workers build two different things at once."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".build-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


#: The shape of the tests that train (pretraining, fine-tuning, serving): two layers
#: of width 32 keep a step in the milliseconds.
TWO_LAYERS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
#: Overrides for a model that must learn a toy task in a few hundred steps: wider, no dropout.
LEARNS = dict(
    embedding_size=32,
    hidden_size=64,
    num_hidden_layers=2,
    intermediate_size=128,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def tiny_config(**overrides):
    """The tests' one model builder: small enough for any test, with E != H and real
    sharing. Tests pass overrides (often ``**TWO_LAYERS``) rather than define their own."""
    from albert_tf.config import AlbertConfig

    fields = dict(
        vocab_size=120,
        embedding_size=16,
        hidden_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=64,
    )
    fields.update(overrides)
    return AlbertConfig(**fields)


def random_batch(vocab_size: int, batch: int = 3, seq: int = 20, seed: int = 0):
    """Ids with two segments and per-row padding (row 0 unpadded)."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, vocab_size, size=(batch, seq)).astype("int32")
    segments = np.zeros_like(ids)
    segments[:, seq // 2 :] = 1
    mask = np.ones_like(ids)
    for row in range(1, batch):
        mask[row, seq - min(4 * row, seq // 2) :] = 0  # never a fully padded row
    ids[mask == 0] = 0
    segments[mask == 0] = 0
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


# --------------------------------------------------------------------------
# The layer contract, in the spirit of keras-hub's TestCase.run_layer_test /
# run_backbone_test: what every public layer and model of albert_tf promises.

# Positional call arguments: arrays, or dicts of arrays for the models.
CallArgs = tuple[Any, ...]
MIXED_POLICY = "mixed_bfloat16"


def _shapes(outputs: Any) -> Any:
    import keras

    return keras.tree.map_structure(lambda t: tuple(t.shape), outputs)


def _batch_free(shapes: Any) -> Any:
    """``shapes`` (dicts, lists, tuples of ints) with every batch size None."""
    if isinstance(shapes, dict):
        return {k: _batch_free(v) for k, v in shapes.items()}
    if isinstance(shapes, list):
        return [_batch_free(v) for v in shapes]
    return (None, *shapes[1:])


def _numpy(outputs: Any) -> Any:
    import keras

    return keras.tree.map_structure(lambda t: np.asarray(keras.ops.convert_to_numpy(t)), outputs)


def _assert_outputs_equal(actual: Any, expected: Any, what: str) -> None:
    import keras

    actual, expected = _numpy(actual), _numpy(expected)
    keras.tree.assert_same_structure(actual, expected)
    for a, e in zip(keras.tree.flatten(actual), keras.tree.flatten(expected), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6, err_msg=what)


def _outputs_differ(a: Any, b: Any) -> bool:
    import keras

    return any(
        not np.allclose(x, y, rtol=1e-6, atol=1e-6)
        for x, y in zip(keras.tree.flatten(_numpy(a)), keras.tree.flatten(_numpy(b)), strict=True)
    )


def _symbolic(args: CallArgs) -> CallArgs:
    """keras.Input twins of ``args``, batch dimension left unknown."""
    import keras

    def make(array: np.ndarray, name: str) -> keras.KerasTensor:
        return keras.Input(shape=array.shape[1:], dtype=str(array.dtype), name=name)

    symbolic = []
    for i, arg in enumerate(args):
        if isinstance(arg, dict):
            symbolic.append({k: make(v, k) for k, v in arg.items()})
        else:
            symbolic.append(make(arg, f"arg_{i}"))
    return tuple(symbolic)


def _canonical(config: dict[str, Any]) -> str:
    # JSON text: tuples and lists compare alike, and a value JSON cannot
    # hold fails here rather than at `.keras` save time.
    return json.dumps(config, sort_keys=True)


def _as_config_value(value: Any) -> Any:
    """What ``get_config`` should hold for a constructor argument."""
    import keras

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_as_config_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_config_value(v) for k, v in value.items()}
    if hasattr(value, "to_hf_dict"):  # AlbertConfig, in the dialect layers write
        return value.to_hf_dict()
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    return keras.saving.serialize_keras_object(value)  # layers, initializers, functions


def _holds(actual: Any, expected: Any) -> bool:
    """``actual`` has every entry of ``expected`` (dicts may hold more)."""
    if isinstance(expected, dict):
        if isinstance(actual, str) and set(expected) >= {"class_name", "config"}:
            # Keras writes built-in objects by name: "relu", "zeros".
            return actual == expected["config"].get("name", expected["class_name"])
        return isinstance(actual, dict) and all(
            k in actual and _holds(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(_holds(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return actual == expected


def _with_policy(init_kwargs: dict[str, Any], policy: str) -> dict[str, Any]:
    # Layer arguments (a task model's backbone) are rebuilt under the policy
    # too, as a user would build them.
    kwargs = {}
    for key, value in init_kwargs.items():
        if hasattr(value, "get_config") and hasattr(value, "dtype_policy"):
            config = {**value.get_config(), "dtype": policy}
            value = type(value).from_config(config)
        kwargs[key] = value
    return {**kwargs, "dtype": policy}


def run_layer_test(
    cls: type[keras.layers.Layer],
    init_kwargs: dict[str, Any],
    make_args: Callable[[int], CallArgs],
    expected_output_shape: Callable[[int], Any],
    tmp_path: pathlib.Path,
    *,
    seq_lengths: tuple[int, int] = (7, 12),
    mixed_output_dtypes: Any = None,
) -> keras.layers.Layer:
    """Checks the contract every public albert_tf layer and model keeps.

    1. ``cls`` is registered as ``albert_tf>ClassName``.
    2. Called on two sequence lengths, one instance's outputs have the
       expected shapes.
    3. ``get_config`` holds every constructor argument with the value given,
       survives JSON, and ``from_config`` (through
       `keras.saving.deserialize_keras_object`, as loading does) returns the
       same class with the same config and weight shapes; with the original's
       weights it gives the same outputs (fresh weights do not, so the
       comparison can fail).
    4. Called on `keras.Input`s (batch unknown), it builds a functional model
       with the expected symbolic shapes and the eager outputs.
    5. Saved as ``.keras`` (a model itself; a layer inside that functional
       model) and loaded, it gives identical outputs.
    6. Built with ``dtype="mixed_bfloat16"`` (the global policy stays
       float32, so a sublayer that drops the policy is caught), every
       sublayer computes in bfloat16 and every variable is float32.

    Args:
        cls: the layer or model class.
        init_kwargs: constructor arguments (no ``dtype``).
        make_args: positional call arguments for a sequence length.
        expected_output_shape: the output shapes (a structure of tuples) for
            a sequence length, batch included.
        tmp_path: where the ``.keras`` file goes.
        seq_lengths: two different sequence lengths to call with.
        mixed_output_dtypes: if given, the output dtypes under
            ``mixed_bfloat16`` (a structure of dtype names).

    Returns:
        The float32 instance, built.
    """
    import keras

    assert len(set(seq_lengths)) == 2, "the variable-length check needs two lengths"
    assert keras.saving.get_registered_name(cls) == f"albert_tf>{cls.__name__}"
    layer = cls(**init_kwargs)

    # 2. Shapes at two sequence lengths, one instance.
    args = make_args(seq_lengths[0])
    outputs = layer(*args)
    for seq in seq_lengths:
        shapes = _shapes(layer(*make_args(seq)))
        assert shapes == expected_output_shape(seq), f"seq={seq}: {shapes}"

    # 3. Config round trip, through JSON and the registry.
    config = layer.get_config()
    config_json = json.loads(_canonical(config))
    for key, value in init_kwargs.items():
        assert key in config_json, f"get_config() lacks the argument {key!r}"
        expected = json.loads(json.dumps(_as_config_value(value)))
        assert _holds(config_json[key], expected), (key, config_json[key], expected)
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    clone = keras.saving.deserialize_keras_object(serialized)
    assert type(clone) is cls
    assert _canonical(clone.get_config()) == _canonical(config)
    fresh_outputs = clone(*args)
    assert [tuple(w.shape) for w in clone.weights] == [tuple(w.shape) for w in layer.weights]
    assert _outputs_differ(fresh_outputs, outputs), "fresh weights should change the outputs"
    clone.set_weights(layer.get_weights())
    _assert_outputs_equal(clone(*args), outputs, "from_config + set_weights")

    # 4. Symbolic call: a functional model around the layer.
    symbolic_args = _symbolic(args)
    symbolic_outputs = layer(*symbolic_args)
    batch_free = _batch_free(expected_output_shape(seq_lengths[0]))
    assert _shapes(symbolic_outputs) == batch_free, _shapes(symbolic_outputs)
    functional = keras.Model(
        symbolic_args[0] if len(args) == 1 else list(symbolic_args), symbolic_outputs
    )
    functional_args = args[0] if len(args) == 1 else list(args)
    _assert_outputs_equal(functional(functional_args), outputs, "functional wrapper")

    # 5. `.keras` save and load.
    path = tmp_path / f"{cls.__name__}.keras"
    if isinstance(layer, keras.Model):
        layer.save(path)
        loaded = keras.models.load_model(path)
        assert type(loaded) is cls
        _assert_outputs_equal(loaded(*args), outputs, ".keras round trip")
    else:
        functional.save(path)
        loaded = keras.models.load_model(path)
        assert any(type(sub) is cls for sub in loaded.layers)
        _assert_outputs_equal(loaded(functional_args), outputs, ".keras round trip")

    # 6. Mixed precision: bfloat16 compute, float32 variables, all the way down.
    mixed = cls(**_with_policy(init_kwargs, MIXED_POLICY))
    mixed_outputs = mixed(*args)
    wrong = [
        f"{sub.name}: compute {sub.compute_dtype}, variables {sub.variable_dtype}"
        for sub in mixed._flatten_layers(include_self=True, recursive=True)
        if not isinstance(sub, keras.layers.InputLayer)
        and (sub.compute_dtype, sub.variable_dtype) != ("bfloat16", "float32")
    ]
    assert not wrong, wrong
    assert {w.dtype for w in mixed.weights} == {"float32"}
    if mixed_output_dtypes is not None:
        dtypes = keras.tree.map_structure(
            lambda t: keras.backend.standardize_dtype(t.dtype), mixed_outputs
        )
        assert dtypes == mixed_output_dtypes, dtypes
    return layer


def onednn_enabled() -> bool:
    """Whether this TensorFlow runs oneDNN's graph rewrites (x86-64 pip wheels do)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def executed_ops(function: Any, *args: Any) -> list[str]:
    """The op types TensorFlow's runtime executes for ``function(*args)`` (a
    `tf.function`): its graphs after Grappler and oneDNN's rewrites, as a
    SavedModel's signature runs them."""
    from tensorflow.python.eager import context

    # Traced outside the record (tracing may run eager ops); instantiated, and so
    # optimised and recorded, by its first call inside it.
    concrete = function.get_concrete_function(*args)
    context.enable_run_metadata()
    try:
        context.export_run_metadata()  # drops what other functions left in the record
        concrete(*args)
        metadata = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    return [
        node.op
        for graph in metadata.function_graphs
        for partition in graph.partition_graphs
        for node in partition.node
    ]


def write_tf1_checkpoint(
    prefix: str, shapes: dict[str, tuple[int, ...]], seed: int, extra: dict | None = None
) -> dict[str, np.ndarray]:
    """A TF1 name-based checkpoint at ``prefix``: random float32 arrays of ``shapes``
    (biases and LayerNorm parameters wider, gammas around 1, so a misplaced one shows),
    with ``extra`` (optimizer slots, the step) written beside or over them. Returns the
    random arrays."""
    import tensorflow as tf

    rng = np.random.RandomState(seed)
    arrays = {}
    for name, shape in shapes.items():
        scale = 0.5 if name.endswith(("bias", "beta", "gamma")) else 0.2
        centre = 1.0 if name.endswith("gamma") else 0.0
        arrays[name] = (rng.randn(*shape) * scale + centre).astype(np.float32)
    saved = {**arrays, **(extra or {})}
    names = sorted(saved)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(saved[n]) for n in names],
    )
    return arrays
