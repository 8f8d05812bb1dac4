"""The serving benchmark: one multiple-choice request, ours against ONNX Runtime,
LiteRT and Hugging Face (``python -m bench.serving``; its ``__main__`` says what
it measures and how the parts divide the work); with ``--tasks=span_qa,tagging,
classification`` the other tasks against Hugging Face pipelines and ONNX Runtime
(`bench.serving.tasks`)."""
