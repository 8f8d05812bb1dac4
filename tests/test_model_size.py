"""The paper's parameter figures (Tables 1, 3 and 4), V = 30000."""

import pytest

from albert_tf.model_size import parameter_count
from albert_tf.presets import PRESETS


@pytest.mark.parametrize(
    "preset, expected",
    [
        ("albert_base_v2", 11_683_584),
        ("albert_large_v2", 17_683_968),
        ("albert_xlarge_v2", 58_724_864),
        ("albert_xxlarge_v2", 222_595_584),
        ("bert_base_shaped", 109_081_344),
    ],
)
def test_exact_counts(preset, expected):
    assert parameter_count(PRESETS[preset]).total == expected


@pytest.mark.parametrize(
    "embedding_size, share, paper_millions, without_pooler",
    [
        (64, "all", 10, False),
        (128, "all", 12, False),
        (256, "all", 16, False),
        (768, "all", 31, False),
        (128, "attention", 64, False),
        (128, "ffn", 38, False),
        (768, "attention", 83, False),
        (768, "ffn", 57, False),
        # The paper's not-shared figures round the count without the pooler.
        (64, "none", 87, True),
        (128, "none", 89, True),
        (256, "none", 93, True),
        (768, "none", 108, True),
    ],
)
def test_ablation_grid_rounds_to_paper(embedding_size, share, paper_millions, without_pooler):
    config = PRESETS["albert_base_v2"].replace(embedding_size=embedding_size, share=share)
    count = parameter_count(config)
    total = count.total - (count.pooler if without_pooler else 0)
    assert round(total / 1e6) == paper_millions
