import json
import typing

import pytest

from albert_tf.config import SHARE_MODES, SHARED_BLOCKS, AlbertConfig, ConfigError, ShareMode
from albert_tf.layers.encoder import sharing_plan
from albert_tf.presets import PRESETS

# The albert_config.json shipped with google-research/albert's base v2, keys
# and values as released (dead keys included).
OFFICIAL_BASE_V2 = {
    "attention_probs_dropout_prob": 0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0,
    "embedding_size": 128,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def test_official_gelu_is_the_tanh_approximation(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(OFFICIAL_BASE_V2))
    config = AlbertConfig.from_json(path)
    assert config.hidden_act == "gelu_new"
    assert config.layer_norm_eps == 1e-12
    assert config == PRESETS["albert_base_v2"]


def test_official_round_trip_writes_official_spelling(tmp_path):
    path = tmp_path / "albert_config.json"
    PRESETS["albert_base_zh"].to_official_json(path)
    data = json.loads(path.read_text())
    assert data["hidden_act"] == "relu"
    assert "model_type" not in data
    assert AlbertConfig.from_json(path) == PRESETS["albert_base_zh"]
    PRESETS["albert_base_v2"].to_official_json(path)
    assert json.loads(path.read_text())["hidden_act"] == "gelu"


def test_hf_dialect_keeps_exact_gelu_and_eps(tmp_path):
    config = AlbertConfig(hidden_act="gelu", layer_norm_eps=1e-5)
    path = tmp_path / "config.json"
    config.to_hf_json(path)
    assert json.loads(path.read_text())["model_type"] == "albert"
    assert AlbertConfig.from_json(path) == config
    with pytest.raises(ConfigError, match="tanh approximation"):
        config.to_official_json(tmp_path / "albert_config.json")


def test_hf_config_written_by_transformers_reads(tmp_path):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AlbertConfig(
        vocab_size=100,
        embedding_size=8,
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=64,
        num_hidden_groups=2,
        num_hidden_layers=4,
        inner_group_num=2,
        hidden_act="relu",
        layer_norm_eps=1e-6,
    )
    hf.save_pretrained(tmp_path)
    config = AlbertConfig.from_json(tmp_path / "config.json")
    assert (config.vocab_size, config.num_hidden_groups, config.inner_group_num) == (100, 2, 2)
    assert config.hidden_act == "relu" and config.layer_norm_eps == 1e-6


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(hidden_size=100, num_attention_heads=12), "not divisible by num_attention_heads"),
        (dict(num_hidden_layers=12, num_hidden_groups=5), "not divisible by num_hidden_groups"),
        (dict(hidden_act="swiglu"), "Unknown hidden_act"),
        (dict(share="some"), "Unknown share mode"),
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    ],
)
def test_invalid_configs_name_the_problem(fields, message):
    with pytest.raises(ConfigError, match=message):
        AlbertConfig(**fields)


def test_unknown_official_key_and_activation_are_errors(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**OFFICIAL_BASE_V2, "hidden_sise": 3}))
    with pytest.raises(ConfigError, match="hidden_sise"):
        AlbertConfig.from_json(path)
    path.write_text(json.dumps({**OFFICIAL_BASE_V2, "hidden_act": "gelu_new"}))
    with pytest.raises(ConfigError, match="official"):
        AlbertConfig.from_json(path)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="albert_config.json"):
        AlbertConfig.from_json(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        AlbertConfig.from_json(bad)


def test_group_of_layer_follows_official_floor_rule():
    config = AlbertConfig(num_hidden_layers=12, num_hidden_groups=3)
    assert [config.group_of_layer(i) for i in range(12)] == [0] * 4 + [1] * 4 + [2] * 4


def test_share_modes_have_one_definition():
    # The Literal type and the table the code reads must list the same modes.
    assert typing.get_args(ShareMode) == SHARE_MODES == tuple(SHARED_BLOCKS)
    assert SHARED_BLOCKS["attention"] == (True, False)  # (attention, feed-forward)
    for mode in SHARE_MODES:
        assert AlbertConfig(share=mode).share == mode
    with pytest.raises(ConfigError, match="share mode"):
        AlbertConfig(share="embeddings")


def test_sharing_plan_uses_the_config_group_rule():
    # 6 layers in 3 groups: floor(i*3/6) = 0, 0, 1, 1, 2, 2; not round-robin.
    config = AlbertConfig(num_hidden_layers=6, num_hidden_groups=3, share="all")
    plan = sharing_plan(6, 3, 1, "all")
    assert [slot.attention[1] for slot in plan] == [0, 0, 1, 1, 2, 2]
    assert [config.group_of_layer(i) for i in range(6)] == [0, 0, 1, 1, 2, 2]
