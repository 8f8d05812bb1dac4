"""`AlbertTask`: what every task model (backbone + heads) shares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

import keras

from albert_tf.config import AlbertConfig
from albert_tf.models.backbone import AlbertBackbone


class AlbertTask(keras.Model):
    """Base of the task models: an `AlbertBackbone` plus heads built from its config.

    Subclasses create their heads in ``__init__`` (after calling this one) and
    define ``call``. The backbone is the whole serialized configuration: loading
    rebuilds the heads from its `AlbertConfig` and ties them to its layers, as
    keras-hub's ``Task`` does, so a restored model shares, not copies, a tied
    embedding.
    """

    def __init__(self, backbone: AlbertBackbone, **kwargs):
        # The task model computes in the backbone's precision, like its heads.
        kwargs.setdefault("dtype", backbone.dtype_policy)
        super().__init__(**kwargs)
        self.backbone = backbone

    @classmethod
    def from_albert_config(cls, config: AlbertConfig, dtype: Any = None, **kwargs) -> Self:
        """A task model with a freshly initialised backbone of this shape."""
        return cls(AlbertBackbone(config, dtype=dtype), **kwargs)

    @classmethod
    def head_arguments(cls, arrays: Mapping[str, Any], head_prefix: str) -> dict[str, Any]:
        """Constructor arguments that a saved head's arrays fix (its weight names start
        with ``head_prefix``), such as a classifier's number of labels; none by default."""
        return {}

    @property
    def config(self) -> AlbertConfig:
        return self.backbone.config

    def get_config(self) -> dict[str, Any]:
        return {
            "backbone": keras.layers.serialize(self.backbone),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Self:
        config = dict(config)
        if isinstance(config["backbone"], dict):
            config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)
