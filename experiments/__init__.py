"""Experiments: one-off questions about albert_tf answered with a measurement.

Unlike ``bench/`` they do not compare speeds against peers; each answers one
question (what a fault costs, which input format pretrains best, what a simple
baseline scores), run from the repository root as ``python -m experiments.<name>``.
They follow the benchmarks' protocol (`bench.common.Benchmark`) and write
``experiments/results/<name>.json``; ``experiments/README.md`` indexes them.
"""

import os

#: Where the experiments' reports go (``--smoke``: the temp directory).
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
