"""`AlbertConfig`: the model's hyper-parameters as data.

Reads and writes the two JSON dialects ALBERT checkpoints ship with:

* the official ``albert_config.json`` of google-research/albert, where
  ``"gelu"`` means the tanh approximation of GELU and the layer-norm epsilon
  is fixed at 1e-12 in code, and
* Hugging Face's ``config.json`` (``"model_type": "albert"``), where
  ``"gelu"`` is the exact erf GELU, ``"gelu_new"`` the tanh approximation and
  ``layer_norm_eps`` is a key.

Inside this package ``hidden_act`` always uses the Hugging Face names, which
are unambiguous; the official dialect is translated on the way in and out.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Literal

from albert_tf import storage
from albert_tf.storage import write_json_atomic

# The one definition of the share modes (paper Table 4): which blocks the
# layers of a group share, as (attention, feed-forward). Everything else
# (validation, the sharing plan, command-line choices) reads this table.
ShareMode = Literal["all", "attention", "ffn", "none"]
SHARED_BLOCKS: dict[str, tuple[bool, bool]] = {
    "all": (True, True),
    "attention": (True, False),
    "ffn": (False, True),
    "none": (False, False),
}
SHARE_MODES: tuple[str, ...] = tuple(SHARED_BLOCKS)

#: What a training step's backward pass recomputes instead of keeping
#: (`albert_tf.layers.encoder.set_recompute`): ``none`` keeps what autodiff needs;
#: ``layer`` keeps only each transformer layer's input and runs the layer again
#: (activation memory of one layer instead of L, for about a third more compute).
RECOMPUTE_MODES: tuple[str, ...] = ("none", "layer")

# Activations this package implements, by their Hugging Face name.
#: How the embeddings meet the projection (see `AlbertConfig`).
EMBEDDING_LAYOUTS = ("albert", "brightmart")
ACTIVATIONS = ("gelu_new", "gelu", "relu", "tanh", "silu", "linear")
_HF_ALIASES = {
    "gelu_fast": "gelu_new",
    "gelu_pytorch_tanh": "gelu_new",
    "swish": "silu",
}
# The official code's get_activation(): "gelu" there is the tanh approximation.
_OFFICIAL_TO_HF = {
    "gelu": "gelu_new",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
_HF_TO_OFFICIAL = {
    "gelu_new": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

# Keys of the official albert_config.json that the official code never reads.
_OFFICIAL_DEAD_KEYS = frozenset(
    {
        "down_scale_factor",
        "gap_size",
        "net_structure_type",
        "num_memory_blocks",
        "layers_to_keep",
        "directionality",
        "pooler_fc_size",
        "pooler_num_attention_heads",
        "pooler_num_fc_layers",
        "pooler_size_per_head",
        "pooler_type",
        "ln_type",
    }
)
# Hugging Face bookkeeping keys that carry no architecture.
_HF_IGNORED_KEYS = frozenset(
    {
        "architectures",
        "model_type",
        "transformers_version",
        "torch_dtype",
        "dtype",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "position_embedding_type",
        "output_past",
        "id2label",
        "label2id",
        "finetuning_task",
        "problem_type",
    }
)


def group_of_layer(layer_index: int, num_layers: int, num_groups: int) -> int:
    """Group owning layer ``layer_index`` of ``num_layers`` split into
    ``num_groups``: floor(i·G/L), as the official code.

    `AlbertConfig.group_of_layer` and `sharing_plan` both use it.

    Example:
        >>> [group_of_layer(i, num_layers=6, num_groups=3) for i in range(6)]
        [0, 0, 1, 1, 2, 2]
    """
    return layer_index * num_groups // num_layers


class ConfigError(ValueError):
    """An ALBERT configuration that cannot describe a valid model."""


@dataclasses.dataclass(frozen=True)
class AlbertConfig:
    """Hyper-parameters of an ALBERT model.

    Field names follow the official ``albert_config.json``. Four fields are
    this package's additions: ``layer_norm_eps`` (a key of Hugging Face's
    config; 1e-12 in the official code), ``classifier_dropout_prob`` (dropout
    before the SOP and multiple-choice heads), ``share`` (which sublayers
    are shared across layers: the paper's Table 4 ablation) and
    ``embedding_layout``: ``"albert"`` (Google's: token, position and segment
    embeddings summed and normalised at width E, then projected to H) or
    ``"brightmart"`` (brightmart/albert_zh's: the token embedding projected
    to H with no bias first, position and segment embeddings at width H, and
    the MLM head decoding through the projection's transpose).

    Example:
        >>> cfg = AlbertConfig(vocab_size=1000, hidden_size=64,
        ...                    num_attention_heads=4, intermediate_size=256)
        >>> cfg.head_size
        16
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    layer_norm_eps: float = 1e-12
    classifier_dropout_prob: float = 0.1
    share: ShareMode = "all"
    embedding_layout: str = "albert"

    def __post_init__(self) -> None:
        act = _HF_ALIASES.get(self.hidden_act, self.hidden_act)
        object.__setattr__(self, "hidden_act", act)
        self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raises `ConfigError` naming the offending field and the fix."""
        positive = (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
            "num_hidden_groups",
            "inner_group_num",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}; choose a head "
                "count that divides the hidden size (e.g. hidden_size / 64)."
            )
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ConfigError(
                f"num_hidden_layers={self.num_hidden_layers} is not divisible by "
                f"num_hidden_groups={self.num_hidden_groups}; every group must own "
                "the same number of layers."
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(
                f"num_hidden_groups={self.num_hidden_groups} exceeds "
                f"num_hidden_layers={self.num_hidden_layers}."
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                f"Unknown hidden_act {self.hidden_act!r}; expected one of "
                f"{', '.join(ACTIVATIONS)} (Hugging Face names: 'gelu_new' is the "
                "tanh approximation the official 'gelu' means)."
            )
        if self.embedding_layout not in EMBEDDING_LAYOUTS:
            raise ConfigError(
                f"Unknown embedding_layout {self.embedding_layout!r}; expected one of "
                f"{EMBEDDING_LAYOUTS}."
            )
        if self.share not in SHARE_MODES:
            raise ConfigError(f"Unknown share mode {self.share!r}; expected one of {SHARE_MODES}.")
        for name in (
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
            "classifier_dropout_prob",
        ):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must lie in [0, 1), got {value!r}.")
        if not self.layer_norm_eps > 0:
            raise ConfigError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}.")

    # ------------------------------------------------------------ derived
    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def has_embedding_projection(self) -> bool:
        """The official code projects E→H only when the two differ; brightmart's
        always does."""
        return self.embedding_layout == "brightmart" or self.embedding_size != self.hidden_size

    def group_of_layer(self, layer_index: int) -> int:
        """Group owning layer ``layer_index``: floor(i·G/L), as the official code."""
        return group_of_layer(layer_index, self.num_hidden_layers, self.num_hidden_groups)

    def replace(self, **changes: Any) -> AlbertConfig:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------ dialects
    @classmethod
    def from_official_dict(cls, data: dict[str, Any]) -> AlbertConfig:
        """From the dict of an official ``albert_config.json``."""
        data = dict(data)
        if data.get("ln_type", "postln") != "postln":
            # brightmart's pre-LayerNorm models keep the post-LayerNorm names: only
            # this key tells them apart, and this package has no pre-LayerNorm layer.
            raise ConfigError(
                f"ln_type={data['ln_type']!r}: a pre-LayerNorm model (brightmart's "
                "modeling_preln.py); albert_tf builds post-LayerNorm ALBERT only, and "
                "converting it would compute something else."
            )
        act = data.get("hidden_act", "gelu")
        if act not in _OFFICIAL_TO_HF:
            raise ConfigError(
                f"Unknown hidden_act {act!r} in albert_config.json; the official "
                f"code knows {sorted(_OFFICIAL_TO_HF)}."
            )
        data["hidden_act"] = _OFFICIAL_TO_HF[act]
        return cls._from_known_keys(data, _OFFICIAL_DEAD_KEYS, "albert_config.json")

    @classmethod
    def from_hf_dict(cls, data: dict[str, Any]) -> AlbertConfig:
        """From the dict of a Hugging Face ALBERT ``config.json``."""
        data = dict(data)
        if data.get("model_type", "albert") != "albert":
            raise ConfigError(
                f"config.json describes model_type={data['model_type']!r}, not albert."
            )
        # Hub configs carry generic PretrainedConfig keys (use_cache,
        # output_attentions, ...) that say nothing about the architecture.
        fields = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(data) - fields - _HF_IGNORED_KEYS)
        if extra:
            logging.warning("Ignoring non-architecture keys of config.json: %s", extra)
        data = {k: v for k, v in data.items() if k not in extra}
        return cls._from_known_keys(data, _HF_IGNORED_KEYS, "config.json")

    @classmethod
    def _from_known_keys(
        cls, data: dict[str, Any], ignored: frozenset[str], source: str
    ) -> AlbertConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields - ignored)
        if unknown:
            raise ConfigError(
                f"Unknown keys in {source}: {unknown}. Remove them or check that "
                "the file describes an ALBERT model."
            )
        kwargs = {k: v for k, v in data.items() if k in fields}
        if kwargs.get("classifier_dropout_prob") is None:
            kwargs.pop("classifier_dropout_prob", None)
        return cls(**kwargs)

    def to_official_dict(self) -> dict[str, Any]:
        """The official dialect. Exact-erf GELU has no official spelling."""
        if self.hidden_act not in _HF_TO_OFFICIAL:
            raise ConfigError(
                f"hidden_act={self.hidden_act!r} cannot be written as an official "
                "albert_config.json (its 'gelu' is the tanh approximation); save "
                "the Hugging Face dialect with to_hf_json() instead."
            )
        data = self._dict()
        data["hidden_act"] = _HF_TO_OFFICIAL[self.hidden_act]
        return data

    def to_hf_dict(self) -> dict[str, Any]:
        data = self._dict()
        data["model_type"] = "albert"
        return data

    def _dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if data["embedding_layout"] == "albert":  # the default: foreign readers need not see it
            del data["embedding_layout"]
        return data

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> AlbertConfig:
        """Reads either dialect; a ``model_type`` key marks Hugging Face's."""
        path = os.fspath(path)
        if not storage.exists(path):
            raise FileNotFoundError(
                f"No ALBERT config at {path!r}. Pass the albert_config.json that "
                "came with the checkpoint (or a Hugging Face config.json)."
            )
        try:
            data = json.loads(storage.read_text(path))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path} is not valid JSON: {e}") from e
        if "model_type" in data:
            return cls.from_hf_dict(data)
        return cls.from_official_dict(data)

    def to_official_json(self, path: str | os.PathLike[str]) -> None:
        write_json_atomic(path, self.to_official_dict(), sort_keys=True)

    def to_hf_json(self, path: str | os.PathLike[str]) -> None:
        write_json_atomic(path, self.to_hf_dict(), sort_keys=True)
