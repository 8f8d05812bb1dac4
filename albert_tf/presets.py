"""Named model configurations: the paper's, Google's Chinese and brightmart's."""

from __future__ import annotations

from albert_tf.config import AlbertConfig

# Paper Table 1 shapes, V=30000, E=128; v2 releases train without dropout.
_V2 = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_V1 = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
_SHAPES = {
    # name: (layers, hidden, heads); FFN is 4H throughout.
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
    "xlarge": (24, 2048, 16),
    "xxlarge": (12, 4096, 64),
}


def _albert(size: str, **extra) -> AlbertConfig:
    layers, hidden, heads = _SHAPES[size]
    fields = dict(
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
    )
    fields.update(extra)
    return AlbertConfig(**fields)


PRESETS: dict[str, AlbertConfig] = {}
for _size in _SHAPES:
    PRESETS[f"albert_{_size}_v2"] = _albert(_size, **_V2)
    PRESETS[f"albert_{_size}_v1"] = _albert(_size, **_V1)
    # The BERT-shaped comparison of Table 1: E = H, nothing shared.
    _hidden = _SHAPES[_size][1]
    PRESETS[f"bert_{_size}_shaped"] = _albert(_size, embedding_size=_hidden, share="none", **_V1)
    # Google's Chinese release: vocab 21128 (BERT-Chinese vocab.txt); relu
    # except for large, as its albert_config.json files say.
    PRESETS[f"albert_{_size}_zh"] = _albert(
        _size,
        vocab_size=21128,
        hidden_act="gelu_new" if _size == "large" else "relu",
        **_V2,
    )
# brightmart's albert_tiny_zh (albert_config_tiny.json).
PRESETS["albert_tiny_zh"] = AlbertConfig(
    vocab_size=21128,
    embedding_size=128,
    hidden_size=312,
    num_hidden_layers=4,
    num_attention_heads=12,
    intermediate_size=1248,
    **_V2,
)


class UnknownPresetError(KeyError, ValueError):
    """A preset name that is not in `PRESETS`: a KeyError for lookups, and a
    ValueError, the kind of mistake commands report in one line."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def get_preset(name: str) -> AlbertConfig:
    """The preset's config; an unknown name lists the known ones.

    >>> get_preset("albert_base_v3")
    Traceback (most recent call last):
    ...
    albert_tf.presets.UnknownPresetError: Unknown preset 'albert_base_v3'. Known presets: ...
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownPresetError(
            f"Unknown preset {name!r}. Known presets: {', '.join(sorted(PRESETS))}."
        ) from None
