"""The tagger's CRF against brute force: every tag sequence enumerated and scored
by its definition (start + logits + transitions + end), so that the forward
algorithm's log-likelihood and Viterbi's best sequence are checked against
arithmetic that shares no code with them, on chains with gaps (unscored pieces),
empty rows and zero-length batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.tagging.crf import ConditionalRandomField

NUM_TAGS = 3


def _crf(seed: int, scale: float = 1.0) -> ConditionalRandomField:
    rng = np.random.default_rng(seed)
    crf = ConditionalRandomField(NUM_TAGS)
    crf.build()
    crf.transitions.assign(scale * rng.normal(size=(NUM_TAGS, NUM_TAGS)).astype("float32"))
    crf.start.assign(scale * rng.normal(size=NUM_TAGS).astype("float32"))
    crf.end.assign(scale * rng.normal(size=NUM_TAGS).astype("float32"))
    return crf


def _enumerated(crf, logits: np.ndarray) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Every tag sequence of a chain's logits [length, tags] and its score, in float64."""
    transitions, start, end = (np.float64(v.numpy()) for v in (crf.transitions, crf.start, crf.end))
    paths = list(itertools.product(range(NUM_TAGS), repeat=len(logits)))
    scores = np.array(
        [
            start[p[0]]
            + end[p[-1]]
            + sum(logits[t, tag] for t, tag in enumerate(p))
            + sum(transitions[a, b] for a, b in itertools.pairwise(p))
            for p in paths
        ]
    )
    return scores, paths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_likelihood_and_viterbi_equal_enumeration_over_chains_with_gaps(seed):
    rng = np.random.default_rng(seed)
    crf = _crf(seed, scale=2.0)  # large enough transitions that Viterbi ≠ argmax
    batch, length = 6, 7
    logits = (2 * rng.normal(size=(batch, length, NUM_TAGS))).astype("float32")
    mask = rng.random((batch, length)) < 0.6
    mask[0], mask[1] = False, True  # a row with no scored piece; a row without gaps
    tags = rng.integers(0, NUM_TAGS, (batch, length))
    likelihood = crf.log_likelihood(logits, tags, mask).numpy()
    decoded = crf.decode(logits, mask).numpy()
    differs_from_argmax = False
    for row in range(batch):
        at = np.flatnonzero(mask[row])
        assert (decoded[row][~mask[row]] == -1).all()
        if not len(at):
            assert likelihood[row] == 0.0
            continue
        chain = np.float64(logits[row, at])
        scores, paths = _enumerated(crf, chain)
        gold = scores[paths.index(tuple(tags[row, at]))]
        log_z = np.logaddexp.reduce(scores)
        # float32 sums of ~20 terms of magnitude ≤ 10: rounding ~1e-5 of that.
        np.testing.assert_allclose(likelihood[row], gold - log_z, rtol=0, atol=1e-4)
        assert tuple(decoded[row, at]) == paths[int(np.argmax(scores))]
        differs_from_argmax |= tuple(decoded[row, at]) != tuple(chain.argmax(-1))
    assert differs_from_argmax  # the transitions mattered somewhere


def test_untrained_crf_is_cross_entropy_and_argmax():
    # Zero transitions: the chain factorises into independent softmaxes, so its
    # negative log-likelihood is the per-position cross-entropy summed.
    rng = np.random.default_rng(3)
    crf = ConditionalRandomField(NUM_TAGS)
    crf.build()
    logits = rng.normal(size=(4, 9, NUM_TAGS)).astype("float32")
    tags = rng.integers(0, NUM_TAGS, (4, 9))
    mask = rng.random((4, 9)) < 0.7
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(tags, logits).numpy()
    np.testing.assert_allclose(
        -crf.log_likelihood(logits, tags, mask).numpy(),
        (cross_entropy * mask).sum(-1),
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_array_equal(
        crf.decode(logits, mask).numpy(), np.where(mask, logits.argmax(-1), -1)
    )


def test_likelihoods_of_all_sequences_sum_to_one_and_gradients_flow():
    crf = _crf(4)
    logits = tf.Variable(np.random.default_rng(4).normal(size=(1, 4, NUM_TAGS)), dtype=tf.float32)
    mask = np.array([[True, False, True, True]])
    with tf.GradientTape() as tape:
        total = tf.reduce_logsumexp(
            [
                crf.log_likelihood(logits, np.array([[a, 0, b, c]]), mask)[0]
                for a, b, c in itertools.product(range(NUM_TAGS), repeat=3)
            ]
        )
        loss = -crf.log_likelihood(logits, np.array([[1, 0, 2, 0]]), mask)[0]
    np.testing.assert_allclose(total.numpy(), 0.0, atol=1e-5)
    grad_logits, grad_transitions = tape.gradient(loss, [logits, crf.transitions])
    # The gap's logits take no part; the scored ones and the transitions learn.
    np.testing.assert_array_equal(grad_logits.numpy()[0, 1], 0.0)
    assert np.abs(grad_logits.numpy()[0, [0, 2, 3]]).min() > 0
    assert np.abs(grad_transitions.numpy()).max() > 0


def test_empty_batches_and_zero_length_texts():
    crf = _crf(5)
    for batch, length in [(0, 0), (0, 3), (2, 0)]:
        logits = np.zeros((batch, length, NUM_TAGS), "float32")
        mask = np.zeros((batch, length), bool)
        assert crf.decode(logits, mask).shape == (batch, length)
        likelihood = crf.log_likelihood(logits, np.zeros((batch, length), "int32"), mask)
        np.testing.assert_array_equal(likelihood.numpy(), np.zeros(batch))


def test_decodes_inside_a_compiled_graph_with_unknown_shapes():
    crf = _crf(6, scale=2.0)
    spec = tf.TensorSpec([None, None, NUM_TAGS], tf.float32), tf.TensorSpec([None, None], tf.bool)
    decode = tf.function(crf.decode, input_signature=spec)
    logits = np.random.default_rng(6).normal(size=(3, 5, NUM_TAGS)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 0, 1, 0, 1], [0, 0, 0, 0, 0]], bool)
    np.testing.assert_array_equal(decode(logits, mask).numpy(), crf.decode(logits, mask).numpy())


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="num_tags must be >= 2"):
        ConditionalRandomField(1)


def test_lamb_neither_decays_nor_trust_scales_the_crf_scores():
    # Zero at first, so LAMB's trust ratio ‖w‖/‖update‖ would hold them at ~0. Exempt,
    # they take plain (uncorrected) Adam steps: with gradient 1, m/sqrt(v) is
    # 0.1/sqrt(0.001) = 3.1623 at step 1 and 0.19/sqrt(0.001999) = 4.2497 at step 2.
    import keras

    from albert_tf.training.optimization import AlbertOptimizer

    crf = ConditionalRandomField(NUM_TAGS, name="crf")
    crf.build()
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    optimizer = AlbertOptimizer(learning_rate=0.01, weight_decay_rate=0.01, epsilon=0.0)
    variables = [crf.transitions, crf.start, crf.end, kernel]
    for _ in range(2):
        optimizer.apply([np.ones(v.shape, "float32") for v in variables], variables)
    for v in variables[:3]:
        np.testing.assert_allclose(v.numpy(), -0.01 * (3.16228 + 4.24968), rtol=1e-4)
    # A kernel still gets the trust ratio: it moves by lr × ‖w‖ per step, so 1 → 0.99².
    np.testing.assert_allclose(kernel.numpy(), 0.99**2, rtol=1e-4)


def test_a_crf_learning_rate_scales_only_the_crf_and_needs_a_crf(tmp_path):
    # AdamW (no trust ratio), gradient 1, weight decay 0.01, a factor 10 on "crf/":
    # the CRF (exempt from decay) moves 10 lr (3.16228 + 4.24968); the kernel moves
    # lr (3.16228 + 0.01 w0), then lr (4.24968 + 0.01 w1), its decay included.
    import keras

    from albert_tf.training.optimization import AlbertOptimizer

    crf = ConditionalRandomField(NUM_TAGS, name="crf")
    crf.build()
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    optimizer = AlbertOptimizer(
        learning_rate=0.01,
        weight_decay_rate=0.01,
        epsilon=0.0,
        layer_adaptation=False,
        learning_rate_multipliers={"crf/": 10.0},
    )
    variables = [crf.transitions, kernel]
    for _ in range(2):
        optimizer.apply([np.ones(v.shape, "float32") for v in variables], variables)
    np.testing.assert_allclose(crf.transitions.numpy(), -0.1 * (3.16228 + 4.24968), rtol=1e-4)
    w1 = 1 - 0.01 * (3.16228 + 0.01)
    np.testing.assert_allclose(kernel.numpy(), w1 - 0.01 * (4.24968 + 0.01 * w1), rtol=1e-5)
    assert AlbertOptimizer.from_config(optimizer.get_config()).learning_rate_multipliers == {
        "crf/": 10.0
    }

    # finetune --tagger_crf_learning_rate on a tagger without a CRF: named, not ignored.
    import collections

    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.tagging.model import AlbertTokenClassifier
    from albert_tf.tasks.tagging.settings import TaggingSettings
    from albert_tf.tasks.tagging.task import TaggingTask
    from albert_tf.tasks.task import TaskData
    from albert_tf.training.finetuning.options import FineTuningOptions

    config = AlbertConfig(
        vocab_size=50, hidden_size=16, embedding_size=8, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=32,
    )  # fmt: skip
    plain = AlbertTokenClassifier.from_albert_config(config, num_tags=3)
    data = TaskData([], None, None, collections.Counter(), ["O", "B-X", "I-X"])
    options = FineTuningOptions(
        "unused", [], task="tagging", settings=TaggingSettings(tagger_crf_learning_rate=1e-3)
    )
    with pytest.raises(ValueError, match="this tagger has no CRF: add --tagger_crf"):
        TaggingTask().trainer(plain, None, data, options, learning_rate=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_marginals_and_log_partition_equal_enumeration(seed):
    # Every chain length 0..4 among padding (gaps and a tail), scores large enough
    # that the posterior is far from uniform and far from one-hot.
    rng = np.random.default_rng(10 + seed)
    crf = _crf(10 + seed, scale=2.0)
    batch, length = 8, 7
    logits = (3 * rng.normal(size=(batch, length, NUM_TAGS))).astype("float32")
    mask = np.zeros((batch, length), bool)
    for row in range(batch):
        chain = row % 5
        mask[row, np.sort(rng.choice(length, chain, replace=False))] = True
    marginals = crf.marginals(logits, mask).numpy()
    log_z = crf.log_partition(logits, mask).numpy()
    tags = rng.integers(0, NUM_TAGS, (batch, length))
    likelihood = crf.log_likelihood(logits, tags, mask).numpy()
    assert marginals.shape == (batch, length, NUM_TAGS)
    for row in range(batch):
        at = np.flatnonzero(mask[row])
        np.testing.assert_array_equal(marginals[row][~mask[row]], 0.0)
        if not len(at):
            assert log_z[row] == 0.0
            continue
        scores, paths = _enumerated(crf, np.float64(logits[row, at]))
        weights = np.exp(scores - np.logaddexp.reduce(scores))
        want = np.zeros((len(at), NUM_TAGS))
        for path, weight in zip(paths, weights, strict=True):
            want[np.arange(len(at)), list(path)] += weight
        # Tolerance from float32: a marginal is exp(alpha + beta − log Z), each a sum of
        # ≤ ~15 terms of magnitude ≤ ~40 here, each step rounding by ≤ 40 × 2^-24 ≈ 2.4e-6;
        # a few such roundings give ~1e-5 in the log, so ~1e-5 absolute on a p ≤ 1
        # (measured: ≤ 4e-6 over 100 chains). log Z alone: 1e-4 as above.
        np.testing.assert_allclose(marginals[row, at], want, rtol=0, atol=3e-5)
        np.testing.assert_allclose(marginals[row, at].sum(-1), 1.0, rtol=0, atol=3e-5)
        # One log Z, two computations: the enumeration's and log_likelihood's.
        np.testing.assert_allclose(log_z[row], np.logaddexp.reduce(scores), rtol=0, atol=1e-4)
        gold = scores[paths.index(tuple(tags[row, at]))]
        np.testing.assert_allclose(log_z[row], gold - likelihood[row], rtol=0, atol=1e-4)


def test_marginals_are_stable_in_a_compiled_graph_and_at_extreme_scores():
    # Scores of ±1e4 would overflow exp() outside log space; the posterior is then one-hot.
    crf = _crf(7)
    spec = tf.TensorSpec([None, None, NUM_TAGS], tf.float32), tf.TensorSpec([None, None], tf.bool)
    marginals = tf.function(crf.marginals, input_signature=spec)
    logits = np.full((2, 3, NUM_TAGS), -1e4, "float32")
    logits[:, :, 1] = 1e4
    mask = np.array([[1, 1, 0], [0, 1, 1]], bool)
    got = marginals(logits, mask).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got[mask], np.tile([0.0, 1.0, 0.0], (4, 1)))
    # A batch of one, eager (a Keras variable + a [1, 1, tags] tensor once lost an axis).
    np.testing.assert_array_equal(crf.marginals(logits[1:], mask[1:]).numpy(), got[1:])
    for batch, length in [(0, 0), (0, 3), (2, 0)]:
        empty = np.zeros((batch, length, NUM_TAGS), "float32")
        assert marginals(empty, np.zeros((batch, length), bool)).shape == (batch, length, NUM_TAGS)
