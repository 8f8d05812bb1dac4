"""Held-out evaluation of a pretraining run: MLM loss and accuracy and the sentence
task's, over the eval files, with standard errors, written to the metrics log once
per step."""

from __future__ import annotations

from albert_tf.data.pipeline import held_out_dataset
from albert_tf.training.evaluation import sum_over_batches, with_standard_errors
from albert_tf.training.losses import summarize
from albert_tf.training.metrics_log import MetricsLog
from albert_tf.training.pretraining.options import PretrainingOptions
from albert_tf.training.steps import TrainingSteps

__all__ = ["HeldOutEvaluation"]


class HeldOutEvaluation:
    """Scores the model behind ``steps`` on ``options.eval_files`` and logs to ``metrics``.

    The result depends only on the weights, so a second call at the same step (the
    entry point's final evaluation after a periodic one at the last step) returns the
    first instead of measuring and logging twice.
    """

    def __init__(self, options: PretrainingOptions, steps: TrainingSteps, metrics: MetricsLog):
        self.options = options
        self.steps = steps
        self.metrics = metrics
        self._last: dict[str, float] | None = None

    def evaluate(self, step: int, log=print) -> dict[str, float]:
        """Held-out MLM loss/accuracy and sentence-task accuracy at ``step`` (the
        weights' global step)."""
        options = self.options
        if not options.eval_files:
            raise ValueError("No eval_files given.")
        cached = self._last
        if cached is not None and cached["step"] == step:
            log("eval " + ", ".join(f"{k}={v:.4f}" for k, v in cached.items()))
            return dict(cached)
        # One pass in file order, the last short batch kept: a small held-out
        # set counts whole.
        dataset = held_out_dataset(
            options.eval_files,
            batch_size=options.eval_batch_size,
            max_seq_length=options.max_seq_length,
            max_predictions_per_seq=options.max_predictions_per_seq,
            seed=options.seed,
        )
        totals = sum_over_batches(self.steps.evaluate, dataset, options.num_eval_steps)
        if not totals:
            raise ValueError(f"The eval data {options.eval_files} holds no examples.")
        results = with_standard_errors(summarize(totals), totals)
        results["step"] = step
        self.metrics.write("eval", {k: v for k, v in results.items() if k != "step"}, step)
        log("eval " + ", ".join(f"{k}={v:.4f}" for k, v in results.items()))
        self._last = dict(results)
        return results
