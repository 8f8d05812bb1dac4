"""The benchmarks of albert_tf: what this package costs, against its peers.

Each module is one command, run from the repository root as a module,
``python -m bench.<name>`` (``--smoke`` checks the plumbing in a minute or
two, ``--help`` says what it measures). `bench.common` holds the one protocol
they all follow (`bench.common.Benchmark`: variants, prepare, plan, measure,
report) and the runner that drives it: measurements in fresh processes
(unless a benchmark measures in its own) with the same thread settings, the
report in ``bench/results/<name>.json``. The
other modules are parts of a benchmark (``step_*``, ``matmul_peak``,
``bench.serving``'s modules). ``bench/README.md`` indexes the benchmarks and their
results; experiments that are not benchmarks live in ``experiments/``.

Nothing here is imported by ``albert_tf``, and importing this package imports
nothing: a benchmark's peer workers (PyTorch) must not load TensorFlow.
"""
