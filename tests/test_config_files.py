import pytest
from helpers.paths import REPO

from albert_tf.config import AlbertConfig
from albert_tf.presets import PRESETS

CONFIG_DIR = REPO / "configs" / "models"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_shipped_config_file_equals_preset(name):
    assert AlbertConfig.from_json(CONFIG_DIR / f"{name}.json") == PRESETS[name]


def test_no_stale_config_files():
    assert {p.stem for p in CONFIG_DIR.glob("*.json")} == set(PRESETS)
