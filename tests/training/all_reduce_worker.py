"""Traces one pretraining step over two logical CPU replicas and prints, as
JSON, the bytes its all-reduce ops carry and the bytes of one gradient.

usage: all_reduce_worker.py TRAIN_FILES TOKENIZER_DIR MODEL_DIR [ACCUMULATION_STEPS]

A process of its own: logical devices must be set before TensorFlow starts.
"""

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

train_files, tokenizer_dir, model_dir = sys.argv[1:4]
accumulation = int(sys.argv[4]) if len(sys.argv) > 4 else 1
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

# tests/ (the folder above this file that holds helpers/), for helpers.training_utils
TESTS = next(
    p for p in Path(__file__).resolve().parents if (p / "helpers" / "__init__.py").is_file()
)
sys.path.insert(0, str(TESTS))
from helpers.training_utils import tiny_albert  # noqa: E402

from albert_tf.tokenizers import load_tokenizer  # noqa: E402
from albert_tf.training.pretraining.options import PretrainingOptions  # noqa: E402
from albert_tf.training.pretraining.trainer import PretrainingTrainer  # noqa: E402


def collective_bytes(concrete) -> tuple[int, int]:
    """(ops, input bytes) of the CollectiveReduce ops in a traced function,
    nested function bodies included."""
    ops, total, seen, pending = 0, 0, set(), [concrete.graph]
    while pending:
        graph = pending.pop()
        for op in graph.get_operations():
            if op.type.startswith("CollectiveReduce"):
                ops += 1
                t = op.inputs[0]
                total += t.shape.num_elements() * t.dtype.size
        for name, function in getattr(graph, "_functions", {}).items():
            if name not in seen and hasattr(function, "graph"):
                seen.add(name)
                pending.append(function.graph)
    return ops, total


options = PretrainingOptions(
    model_dir=model_dir,
    train_files=train_files,
    max_seq_length=32,
    train_batch_size=8,
    gradient_accumulation_steps=accumulation,
    num_train_steps=5,
    num_warmup_steps=1,
    progress_bar=False,
    precision="float32",
)
config = tiny_albert(load_tokenizer(tokenizer_dir).vocabulary_size)
trainer = PretrainingTrainer(config, options, strategy)
steps = trainer.steps
batch = next(trainer.train_iterator)
if accumulation == 1:
    traced = steps.train_fn.get_concrete_function(*batch)
else:
    traced = steps.apply_fn.get_concrete_function()
ops, reduced = collective_bytes(traced)
gradient = int(sum(np.prod(v.shape) for v in steps.variables)) * 4  # float32
print(json.dumps({"ops": ops, "bytes": reduced, "gradient_bytes": gradient, "replicas": 2}))
