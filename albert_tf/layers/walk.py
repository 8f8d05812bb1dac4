"""`distinct_layers`: every layer of a model once, shared ones included once."""

from __future__ import annotations

import keras


def distinct_layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """``model`` and every layer under it, each once (ALBERT calls shared layers again).

    >>> layer = keras.layers.Dense(2)
    >>> model = keras.Sequential([layer, layer])
    >>> [x is layer for x in distinct_layers(model)[1:]]
    [True]
    """
    seen: set[int] = set()
    layers = []
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if id(layer) not in seen:
            seen.add(id(layer))
            layers.append(layer)
    return layers
