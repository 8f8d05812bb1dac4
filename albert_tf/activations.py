"""Activation functions by their Hugging Face names.

The official ALBERT code's ``"gelu"`` is the tanh approximation, which
Hugging Face calls ``"gelu_new"``; ``"gelu"`` here is the exact erf form.
`AlbertConfig` translates the official dialect, so this table only needs the
unambiguous names.
"""

from __future__ import annotations

from collections.abc import Callable

import keras


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_new(x):
    """GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_exact(x):
    """GELU, exact: x·Φ(x) with the normal CDF through erf."""
    return keras.activations.gelu(x, approximate=False)


_ACTIVATIONS: dict[str, Callable] = {
    "gelu_new": gelu_new,
    "gelu": gelu_exact,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "silu": keras.activations.silu,
    "linear": keras.activations.linear,
}


def get_activation(name: str) -> Callable:
    """Returns the Keras activation for a Hugging Face activation name."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}."
        ) from None
