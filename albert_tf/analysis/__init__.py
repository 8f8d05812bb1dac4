"""Analyses of trained models and runs, with their plots.

* `layer_transitions`: how much each applied layer changes its input (the paper's
  Figure 1), from a model directory and held-out text.
* `learning_curves`: a pretraining run's ``metrics.jsonl`` and ``eval_results.json``
  as plottable series.

Plots are drawn with matplotlib's Agg canvas (`plotting`), never a GUI backend.
"""
