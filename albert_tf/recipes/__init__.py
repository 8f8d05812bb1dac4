"""Recipes: builds of several stages that a command runs end to end.

A recipe takes its inputs and settings as arguments (the command's flags give
their defaults) and calls the library and, for its heavy stages, the package's
own commands in subprocesses, so each stage leaves the files its command writes
and an interrupted build resumes. `demo_models` rebuilds the Streamlit demo's
models (``python -m albert_tf.demo_models``).
"""
