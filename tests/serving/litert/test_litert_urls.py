"""`python -m albert_tf.export_litert` with the checkpoint and the ``.tflite`` file
behind ``file://`` URLs, as they would be in a ``gs://`` bucket: read and written
through `tf.io.gfile`, and the file read back from the URL scores as the Keras model."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
from helpers.mc_helpers import tiny_mc_config
from helpers.numerics import albert_budget

import albert_tf
from albert_tf.serving.litert import LiteRTMultipleChoice, custom_op_names
from albert_tf.tasks.multiple_choice.data import pack_multiple_choice

SEQ, QA, OPTIONS = 48, 16, 3
ITEM = ("It rained all day, so she stayed home.", "She stayed _.", ["home", "at sea", ""])


def test_export_litert_reads_and_writes_a_bucket(tmp_path):
    import keras

    from albert_tf.data import iter_sentences, sample_path
    from albert_tf.tokenizers import train_sentencepiece

    bucket, workdir = tmp_path / "bucket", tmp_path / "cwd"
    workdir.mkdir()
    lines = list(itertools.islice(iter_sentences([sample_path("en")]), 600))
    tokenizer = train_sentencepiece(lines, tmp_path / "sp", vocab_size=400, shrink_vocab=True)
    keras.utils.set_random_seed(7)
    model = albert_tf.AlbertMultipleChoice.from_albert_config(
        tiny_mc_config(tokenizer.vocabulary_size)
    )
    head = model.multiple_choice_head.dense
    head.kernel.assign(np.random.RandomState(0).normal(0, 0.5, head.kernel.shape))
    url = f"file://{bucket}"
    albert_tf.save_model(model, f"{url}/mc", tokenizer=tokenizer)
    (bucket / "mc" / "finetune.json").write_text(
        json.dumps({"max_seq_length": SEQ, "max_qa_length": QA})
    )

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [
            sys.executable, "-m", "albert_tf.export_litert",
            f"--checkpoint={url}/mc", f"--output={url}/litert/mc.tflite",
            f"--max_options={OPTIONS}",
        ],
        capture_output=True, text=True, timeout=600, env=env, cwd=workdir,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"exported LiteRT model: {url}/litert/mc.tflite" in result.stdout
    assert list(workdir.iterdir()) == []  # no local "file:" folder
    written = bucket / "litert" / "mc.tflite"
    assert written.stat().st_size > 10_000

    # Read back through the URL: its ops, its packing and its scores.
    assert custom_op_names(f"{url}/litert/mc.tflite") == custom_op_names(written)
    runner = LiteRTMultipleChoice(f"{url}/litert/mc.tflite", num_threads=1)
    assert runner.max_options == OPTIONS
    context, question, options = ITEM
    packed = pack_multiple_choice(
        tokenizer,
        tf.constant([context]),
        tf.constant([question]),
        tf.constant([options]),
        max_seq_length=SEQ,
        max_qa_length=QA,
    )
    got = runner.tokenize(context, question, options)
    for key in ("token_ids", "segment_ids", "padding_mask"):
        value = packed[key].numpy()
        want = np.pad(value, [(0, 0), (0, 0), (0, SEQ - value.shape[-1])])
        np.testing.assert_array_equal(got[key], want, err_msg=key)
    inputs = {k: v[:, :2] for k, v in got.items()}
    logits = model(inputs, training=False).numpy()[0]
    probabilities = runner.predict(context, question, options)
    assert probabilities[2] == 0.0  # the absent option
    # LiteRT's kernels on the same float32 weights: the model's rounding budget.
    atol = albert_budget(model.config, SEQ) * np.abs(logits).max() / 2
    np.testing.assert_allclose(probabilities[:2], tf.nn.softmax(logits).numpy(), rtol=0, atol=atol)
