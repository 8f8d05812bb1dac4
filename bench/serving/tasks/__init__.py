"""Serving speed of span QA, tagging and classification against Hugging Face pipelines
and ONNX Runtime (``python -m bench.serving --tasks=...``; `bench.serving.tasks.benchmark`
says what it measures and how the parts divide the work)."""
