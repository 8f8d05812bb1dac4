"""Tiny pretraining runs for the tests."""

from __future__ import annotations

import os
import socket
import sys

import numpy as np

from albert_tf.config import AlbertConfig
from helpers.testing_utils import TWO_LAYERS, tiny_config


def tiny_albert(vocab_size: int, **overrides) -> AlbertConfig:
    """`tiny_config` in the training shape, for a tokenizer of ``vocab_size`` pieces."""
    fields = dict(
        TWO_LAYERS, vocab_size=vocab_size, max_position_embeddings=32, classifier_dropout_prob=0.0
    )
    return tiny_config(**{**fields, **overrides})


def tiny_options(model_dir, prepared, **overrides):
    from albert_tf.training.pretraining.options import PretrainingOptions

    fields = dict(
        model_dir=str(model_dir),
        train_files=prepared.train_files,
        eval_files=prepared.eval_files,
        max_seq_length=32,
        train_batch_size=8,
        eval_batch_size=8,
        num_train_steps=6,
        num_warmup_steps=1,
        learning_rate=0.01,
        save_checkpoints_steps=1000,
        log_every_steps=1000,
        num_eval_steps=0,
        progress_bar=False,
        # Exact-equality tests (accumulation, distribution, resume) need it;
        # "auto" would pick bfloat16 on CPUs with bf16 instructions.
        precision="float32",
    )
    fields.update(overrides)
    return PretrainingOptions(**fields)


def flat_weights(model) -> np.ndarray:
    return np.concatenate([np.asarray(w, np.float64).ravel() for w in model.weights])


def scoring_batches(files: str, max_seq_length: int = 32, batch_size: int = 8):
    """The held-out batches every scorer should see, spelled out with the
    general pipeline's own arguments (not through `held_out_dataset`)."""
    from albert_tf.data.pipeline import pretraining_dataset

    return pretraining_dataset(
        files,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        seed=12345,
        shuffle=False,
        repeat=False,
        drop_remainder=False,
    )


#: A tiny model and recipe for runs of `python -m albert_tf.pretrain`.
TINY = [
    "--preset=albert_base_v2",
    "--embedding_size=16",
    "--hidden_size=32",
    "--num_hidden_layers=2",
    "--num_attention_heads=2",
    "--intermediate_size=64",
    "--max_seq_length=32",
    "--train_batch_size=8",
    "--eval_batch_size=8",
    "--num_warmup_steps=2",
    "--learning_rate=0.01",
    "--log_every_steps=5",
    "--num_eval_steps=0",
]


def pretrain_command(prepared, model_dir, *extra) -> list[str]:
    """The pretrain command on the prepared shards, with `TINY` and ``extra`` flags."""
    return [
        sys.executable,
        "-m",
        "albert_tf.pretrain",
        f"--model_dir={model_dir}",
        f"--train_files={prepared.train_files}",
        f"--eval_files={prepared.eval_files}",
        f"--tokenizer_dir={prepared.tokenizer_dir}",
        *TINY,
        *extra,
    ]


def pretrain_env(**extra) -> dict[str, str]:
    """A quiet CPU environment for those runs; ``extra`` sets variables (faults)."""
    # Unbuffered: a run killed by SIGKILL keeps the lines it printed.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    env.pop("ALBERT_TF_FAULTS", None)
    env.update(extra)
    return env


def free_ports(n: int) -> list[int]:
    """``n`` loopback ports free right now, for the workers of a multi-worker test."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
