"""Learning curves of pretraining runs, overlaid in one PNG.

    python -m albert_tf.plot_metrics runs/share_all runs/share_none --output=curves.png

Reads each ``RUN_DIR/metrics.jsonl`` (training windows and held-out evaluations),
``eval_results.json`` (the unigram baseline, if the run finished) and
``pretraining_run.json`` (sharing mode and sentence task, for the legend). Draws MLM
loss and accuracy and the sentence task's (SOP or NSP) loss and accuracy, and writes
the plotted numbers next to the PNG as ``FILE.json``
(`albert_tf.analysis.learning_curves`).
"""

from __future__ import annotations

import os

from absl import flags

from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.storage import write_json_atomic

FLAGS = flags.FLAGS
flags.DEFINE_string("output", None, "The PNG to write; the numbers go to the same name .json.")
flags.DEFINE_multi_string(
    "label", None, "Legend names, one per RUN_DIR in order; default: the folder name."
)


def main(run_dirs: list[str]) -> None:
    if not FLAGS.output.lower().endswith(".png"):
        raise UserError(f"--output={FLAGS.output} must name a .png file")
    labels = FLAGS.label or []
    if labels and len(labels) != len(run_dirs):
        raise UserError(f"{len(labels)} --label for {len(run_dirs)} run(s); give one each")

    from albert_tf.analysis.learning_curves import learning_curve, plot_learning_curves

    curves = [
        learning_curve(run_dir, labels[i] if labels else None) for i, run_dir in enumerate(run_dirs)
    ]
    plot_learning_curves(curves, FLAGS.output)
    numbers = os.path.splitext(FLAGS.output)[0] + ".json"
    write_json_atomic(numbers, {"runs": curves})
    for curve in curves:
        if curve["skipped_lines"]:
            print(f"{curve['run_dir']}: skipped {curve['skipped_lines']} unreadable line(s)")
    print(f"wrote {FLAGS.output} and {numbers}")


def run() -> None:
    """The `albert-plot-metrics` console script."""
    runner.run(main, "plot_metrics", required=["output"], arguments="RUN_DIR")


if __name__ == "__main__":
    run()
