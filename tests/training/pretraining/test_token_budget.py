"""Training with token-budget batches: bounded retracing, loss as a mean."""

import glob
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from helpers.training_utils import tiny_albert, tiny_options

from albert_tf.data.examples import PretrainingExample, serialize_example
from albert_tf.training.pretraining.trainer import PretrainingTrainer


@pytest.fixture(scope="module")
def varied(prepared, vocab, tmp_path_factory):
    """Shards of examples 4 to 32 tokens long (the prepared ones are nearly all 32)."""
    d = tmp_path_factory.mktemp("varied")
    shards = os.path.dirname(sorted(glob.glob(prepared.train_files))[0])
    shutil.copy(os.path.join(shards, "masking_vocab.json"), d)
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(d / "pretrain-0.tfrecord")) as w:
        for _ in range(400):
            n = int(rng.integers(4, 33))
            ids = [2, *rng.integers(5, vocab, n - 2).tolist(), 3]
            w.write(serialize_example(PretrainingExample(ids, [0] * n, int(rng.integers(2)))))
    return str(d / "*.tfrecord")


def test_token_budget_training_traces_once_per_bucket(tmp_path, prepared, vocab, varied):
    options = tiny_options(
        tmp_path / "run",
        prepared,
        train_files=varied,
        eval_files=None,
        tokens_per_batch=256,  # buckets of 16 and 32 tokens: batches of 16 and 8
        log_every_steps=1,
    )
    trainer = PretrainingTrainer(tiny_albert(vocab), options)
    trainer.train(log=lambda *_: None)
    assert trainer.step == options.num_train_steps
    traces = trainer.steps.train_fn.experimental_get_tracing_count()
    assert 1 < traces <= 2, traces  # both buckets came, each traced once
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == options.num_train_steps
    for line in lines:
        assert np.isfinite(line["mlm_loss"]) and np.isfinite(line["sop_loss"])
        # Real tokens per example, counted from the batches: 4 to 32 here.
        assert 4 <= line["tokens_per_second"] / line["examples_per_second"] <= 32


def test_larger_batches_do_not_scale_the_loss(tmp_path, prepared, vocab):
    # A batch of every example twice is a batch twice as large with the same
    # per-token and per-example means: loss, gradient and update must match.
    trainers = [
        PretrainingTrainer(tiny_albert(vocab), tiny_options(tmp_path / name, prepared))
        for name in ("once", "twice")
    ]
    features, labels = next(trainers[0].train_iterator)
    twice = tf.nest.map_structure(lambda t: tf.concat([t, t], axis=0), (features, labels))
    once_sums = {k: float(v) for k, v in trainers[0].steps.train([(features, labels)]).items()}
    twice_sums = {k: float(v) for k, v in trainers[1].steps.train([twice]).items()}
    assert twice_sums["mlm_count"] == 2 * once_sums["mlm_count"]
    for task, count in (("mlm_loss_sum", "mlm_count"), ("sop_loss_sum", "sop_count")):
        once_mean = once_sums[task] / once_sums[count]
        assert twice_sums[task] / twice_sums[count] == pytest.approx(once_mean, rel=1e-5)
    assert twice_sums["grad_norm"] == pytest.approx(once_sums["grad_norm"], rel=1e-4)
    for a, b in zip(trainers[0].model.weights, trainers[1].model.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, err_msg=a.path)


def test_token_budget_below_one_full_example_is_refused(tmp_path, prepared, vocab):
    options = tiny_options(tmp_path / "run", prepared, tokens_per_batch=31)
    with pytest.raises(ValueError, match=r"--tokens_per_batch to at least 32"):
        PretrainingTrainer(tiny_albert(vocab), options)
