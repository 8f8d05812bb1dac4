"""Parameter counts: ``python -m albert_tf.params``.

Without flags, prints the paper's Table 1 models and the Table 3/4 grid of
embedding size × sharing mode next to the paper's figures. With ``--preset``
or ``--config``, builds that one model and counts its real weights; the last
line is ``total_parameters: N``.
"""

from __future__ import annotations

import sys

from absl import flags

from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.config import SHARE_MODES, AlbertConfig
from albert_tf.presets import PRESETS, get_preset

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", None, f"One of: {', '.join(sorted(PRESETS))}.")
flags.DEFINE_string("config", None, "An albert_config.json or HF config.json.")

# Paper figures in millions: Table 1 (V=30000).
PAPER_TABLE_1 = {
    "albert_base_v2": 12,
    "albert_large_v2": 18,
    "albert_xlarge_v2": 60,
    "albert_xxlarge_v2": 235,
    "bert_base_shaped": 108,
    "bert_large_shaped": 334,
}
# Tables 3 and 4 (ALBERT-base shape): (E, share) -> millions.
PAPER_ABLATION = {
    (64, "none"): 87,
    (128, "none"): 89,
    (256, "none"): 93,
    (768, "none"): 108,
    (64, "all"): 10,
    (128, "all"): 12,
    (256, "all"): 16,
    (768, "all"): 31,
    (128, "attention"): 64,
    (128, "ffn"): 38,
    (768, "attention"): 83,
    (768, "ffn"): 57,
}


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f}M"


def table_rows() -> list[tuple[str, int, int, int | None]]:
    """(label, total, total without pooler, paper millions)."""
    from albert_tf.model_size import parameter_count

    rows = []
    for name, paper in PAPER_TABLE_1.items():
        count = parameter_count(PRESETS[name])
        rows.append((name, count.total, count.total - count.pooler, paper))
    base = PRESETS["albert_base_v2"]
    for share in SHARE_MODES:
        for e in (64, 128, 256, 768):
            count = parameter_count(base.replace(embedding_size=e, share=share))
            label = f"base E={e} share={share}"
            rows.append(
                (
                    label,
                    count.total,
                    count.total - count.pooler,
                    PAPER_ABLATION.get((e, share)),
                )
            )
    return rows


def print_table(out=sys.stdout) -> None:
    header = (
        f"{'model':<28} {'parameters':>12} {'':>8} {'w/o pooler':>10} {'paper':>6}  rounds to paper"
    )
    print(header, file=out)
    print("-" * len(header), file=out)
    for label, total, no_pooler, paper in table_rows():
        paper_s = f"{paper}M" if paper is not None else "-"
        print(
            f"{label:<28} {total:>12,} {_millions(total):>8} "
            f"{_millions(no_pooler):>10} {paper_s:>6}  {_match(total, no_pooler, paper)}",
            file=out,
        )
    print(
        "\nCounts are the backbone: embeddings, E→H projection, encoder and pooler "
        "(V=30000).\nThe paper's not-shared figures round the count without the "
        "pooler; its xlarge/xxlarge\nfigures (60M/235M) exceed what those shapes "
        "hold (58.7M/222.6M).",
        file=out,
    )


def _match(total: int, no_pooler: int, paper: int | None) -> str:
    if paper is None:
        return ""
    if round(total / 1e6) == paper:
        return "yes"
    if round(no_pooler / 1e6) == paper:
        return "yes, without pooler"
    return "no"


def count_built_model(config: AlbertConfig) -> int:
    """Builds the backbone and counts its distinct weights."""
    import numpy as np

    from albert_tf.models.backbone import AlbertBackbone

    backbone = AlbertBackbone(config)
    return int(sum(np.prod(w.shape) for w in backbone.weights))


def main() -> None:
    if FLAGS.preset and FLAGS.config:
        raise UserError("Pass --preset or --config, not both.")
    if not (FLAGS.preset or FLAGS.config):
        print_table()
        return
    from albert_tf.model_size import parameter_count

    config = get_preset(FLAGS.preset) if FLAGS.preset else AlbertConfig.from_json(FLAGS.config)
    count = parameter_count(config)
    for field in ("embedding", "projection", "attention", "feedforward", "pooler"):
        print(f"{field}: {getattr(count, field):,}")
    total = count_built_model(config)
    if total != count.total:  # the closed form and the model must agree
        raise AssertionError(f"internal error: built model has {total}, formula {count.total}.")
    print(f"total_parameters: {total}")


def run() -> None:
    """The `albert-params` console script."""
    runner.run(main, "params")


if __name__ == "__main__":
    run()
