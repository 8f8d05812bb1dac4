"""Tagging's word probabilities and entity scores: a word of several WordPiece pieces
aggregated as first, average or max (against numpy on the pieces' rows, the words
read off the "##" prefixes), and with a CRF, entity scores that are the chain's
marginals (against every tag sequence enumerated)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.tagging.crf import ConditionalRandomField
from albert_tf.tasks.tagging.decoding import (
    WORD_AGGREGATIONS,
    chunks,
    decode_entities,
    tag_scheme,
    words,
)
from albert_tf.tokenizers import WordPieceTokenizer

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "##son", "lives", "in",
         "york", "##shire", "##s", "new", "jersey", "and", "."]  # fmt: skip
TEXTS = ["Johnson lives in Yorkshire.", "John and Johnsons", "New Jersey"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("wordpiece") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return WordPieceTokenizer(path)


def _pieces(tokenizer) -> dict[str, tf.RaggedTensor]:
    """`words`' inputs (what `pack_tagging` passes on) straight from the tokenizer."""
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(TEXTS))
    return {
        "piece_ids": ids,
        "piece_starts": starts,
        "piece_ends": ends,
        "word_starts": tokenizer.word_starts(ids),
    }


def _numpy_words(pieces: list[str], rows: np.ndarray, aggregation: str) -> np.ndarray:
    """A text's word rows, each word grouped from its pieces' "##" prefixes."""
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if piece.startswith("##"):
            groups[-1].append(i)
        else:
            groups.append([i])
    out = []
    for group in groups:
        if aggregation == "first":
            out.append(rows[group[0]])
        elif aggregation == "average":
            out.append(rows[group].mean(0))
        else:  # the first piece with the largest max, as Python's max() picks it
            out.append(rows[max(group, key=lambda i: rows[i].max())])
    return np.array(out)


def test_multi_piece_words_aggregate_as_numpy_does(tokenizer):
    packed = _pieces(tokenizer)
    pieces = [[VOCAB[i] for i in row] for row in packed["piece_ids"].to_list()]
    assert pieces[0] == ["john", "##son", "lives", "in", "york", "##shire", "."]
    assert pieces[1] == ["john", "and", "john", "##son", "##s"]  # a word of three pieces
    count = sum(len(p) for p in pieces)
    rows = np.random.default_rng(0).dirichlet(np.ones(len(TAGS)), count).astype("float32")
    # "johnsons" is pieces 9 to 11: a tie for the largest probability between 10 and
    # 11 (the same row shifted, so that the wrong one shows), above 9; max takes 10.
    rows[10] = np.roll(rows[11], 1)
    rows[9] = 1 / len(TAGS)
    offsets = np.cumsum([0] + [len(p) for p in pieces])
    by_aggregation = {}
    for aggregation in WORD_AGGREGATIONS:
        found = words(tf.constant(rows), packed, aggregation)
        got = found["probabilities"].to_list()
        for text, piece_list in enumerate(pieces):
            want = _numpy_words(piece_list, rows[offsets[text] : offsets[text + 1]], aggregation)
            # first and max copy rows; average is a float32 mean of ≤ 3 rows (≤ 2 ulp).
            np.testing.assert_allclose(np.array(got[text]), want, rtol=3e-7, atol=0)
        assert found["starts"].to_list() == [[0, 8, 14, 17, 26], [0, 5, 9], [0, 4]]
        assert found["ends"].to_list() == [[7, 13, 16, 26, 27], [4, 8, 17], [3, 10]]
        by_aggregation[aggregation] = found
    got_max = by_aggregation["max"]["probabilities"].to_list()[1][2]
    np.testing.assert_array_equal(got_max, rows[10])
    # The default is "first": what callers that pass no aggregation got before.
    default = words(tf.constant(rows), packed)["probabilities"]
    np.testing.assert_array_equal(
        default.flat_values.numpy(), by_aggregation["first"]["probabilities"].flat_values.numpy()
    )


def test_an_unknown_aggregation_is_named(tokenizer):
    with pytest.raises(ValueError, match="'mean' is not one of first, average, max"):
        words(tf.zeros([0, len(TAGS)]), _pieces(tokenizer), "mean")


def _enumerated_marginals(crf, emissions: np.ndarray) -> np.ndarray:
    """p(word t has tag k | the chain) by summing every tag sequence's weight, float64."""
    transitions, start, end = (np.float64(v.numpy()) for v in (crf.transitions, crf.start, crf.end))
    paths = list(itertools.product(range(emissions.shape[1]), repeat=len(emissions)))
    scores = np.array(
        [
            start[p[0]]
            + end[p[-1]]
            + emissions[np.arange(len(p)), list(p)].sum()
            + sum(transitions[a, b] for a, b in itertools.pairwise(p))
            for p in paths
        ]
    )
    weights = np.exp(scores - np.logaddexp.reduce(scores))
    marginals = np.zeros(emissions.shape)
    for path, weight in zip(paths, weights, strict=True):
        marginals[np.arange(len(path)), list(path)] += weight
    return marginals


def test_with_a_crf_entity_scores_are_the_chains_marginals():
    rng = np.random.default_rng(1)
    crf = ConditionalRandomField(len(TAGS))
    crf.build()
    crf.transitions.assign(rng.normal(size=(len(TAGS), len(TAGS))).astype("float32"))
    crf.start.assign(rng.normal(size=len(TAGS)).astype("float32"))
    crf.end.assign(rng.normal(size=len(TAGS)).astype("float32"))
    # Two texts of 4 and 3 words, each leaning towards an entity of two words.
    lean = [[1, 2, 0, 3], [0, 3, 4]]
    probabilities = []
    for text in lean:
        p = rng.uniform(0.05, 0.3, (len(text), len(TAGS)))
        p[np.arange(len(text)), text] += 0.8
        probabilities.append((p / p.sum(-1, keepdims=True)).astype("float32"))
    ragged = tf.RaggedTensor.from_row_lengths(np.concatenate(probabilities), [4, 3])
    spans = [[(0, 3), (4, 6), (7, 9), (10, 12)], [(0, 2), (3, 5), (6, 8)]]
    starts = tf.ragged.constant([[a for a, _ in text] for text in spans], tf.int32)
    ends = tf.ragged.constant([[b for _, b in text] for text in spans], tf.int32)
    found = decode_entities(ragged, starts, ends, tag_scheme(TAGS), crf)
    plain = decode_entities(ragged, starts, ends, tag_scheme(TAGS))
    assert sum(len(s) for s in found["scores"].to_list()) >= 3
    for text, p in enumerate(probabilities):
        # The chain's emissions are the log-probabilities, as Viterbi's are.
        marginals = _enumerated_marginals(crf, np.log(np.float64(p)))
        tags = found["tags"].to_list()[text]
        chosen = marginals[np.arange(len(tags)), tags]
        # The entities' words as conlleval reads the tags (checked against seqeval in
        # test_tagging_decoding); a score is the mean of its words' chosen marginals.
        want = [
            chosen[first : last + 1].mean() for _, first, last in chunks([TAGS[t] for t in tags])
        ]
        # float32 forward-backward over ≤ 4 steps: ≤ ~1e-5 on a probability (test_crf).
        np.testing.assert_allclose(found["scores"].to_list()[text], want, rtol=0, atol=3e-5)
        # Not the softmax probabilities of the same tags: the chain moved the scores.
        softmax = p[np.arange(len(tags)), tags]
        means = [softmax[a : b + 1].mean() for _, a, b in chunks([TAGS[t] for t in tags])]
        assert np.abs(np.subtract(want, means)).min() > 1e-3
    # Without a CRF the score stays the softmax probability's mean.
    assert plain["scores"].to_list()[1] == pytest.approx(
        [probabilities[1][1:3, [3, 4]].diagonal().mean()]
    )


@pytest.mark.parametrize("aggregation", ["average", "max"])
def test_the_export_and_the_trainer_aggregate_as_fine_tuning_recorded(tokenizer, aggregation):
    # A real tiny tagger: the serving module built from fine-tuning's settings and
    # the trainer's evaluation both read words as `aggregation` says, i.e. as numpy
    # does on the same piece rows.
    from helpers.testing_utils import tiny_config

    from albert_tf.tasks.tagging.model import AlbertTokenClassifier
    from albert_tf.tasks.tagging.serving import TaggerServingModule
    from albert_tf.tasks.tagging.trainer import TaggingTrainer

    model = AlbertTokenClassifier.from_albert_config(
        tiny_config(vocab_size=len(VOCAB), max_position_embeddings=32), num_tags=len(TAGS)
    )
    settings = {"label_names": TAGS, "tagging_stride": 14, "word_aggregation": aggregation}
    module, metadata, _ = TaggerServingModule.for_export(model, tokenizer, settings, 16)
    assert metadata["word_aggregation"] == aggregation
    packed = module._pack(tf.constant(TEXTS))
    pieces = [[VOCAB[i] for i in row] for row in packed["piece_ids"].to_list()]
    offsets = np.cumsum([0] + [len(p) for p in pieces])
    rows = np.random.default_rng(1).dirichlet(np.ones(len(TAGS)), offsets[-1]).astype("float32")
    served = module.decode(tf.constant(rows), packed)
    expected_words = [
        _numpy_words(p, rows[a:b], aggregation)
        for p, a, b in zip(pieces, offsets[:-1], offsets[1:], strict=True)
    ]
    found = words(tf.constant(rows), packed)  # first pieces, and the words' spans

    def decoded(word_rows) -> dict[str, np.ndarray]:
        out = decode_entities(word_rows, found["starts"], found["ends"], tag_scheme(TAGS))
        defaults = {"starts": -1, "ends": -1, "labels": b"", "scores": 0.0}
        return {k: out[k].to_tensor(default_value=v).numpy() for k, v in defaults.items()}

    expected = decoded(tf.ragged.constant(expected_words, ragged_rank=1, dtype=tf.float32))
    by_first = decoded(found["probabilities"])["scores"]  # what ignoring the setting gives
    assert by_first.shape != expected["scores"].shape or not np.allclose(
        by_first, expected["scores"]
    )
    for key, want in expected.items():
        got = served[key].numpy()
        if key == "scores":
            np.testing.assert_allclose(got, want, rtol=1e-6)
        else:
            assert got.tolist() == want.tolist(), key
    trainer = TaggingTrainer(
        model, tokenizer, tag_names=TAGS, word_aggregation=aggregation, output_dir="unused",
        max_seq_length=16, progress=False,
    )  # fmt: skip
    first = np.flatnonzero(packed["word_starts"].to_list()[1])
    np.testing.assert_allclose(
        trainer._word_rows({"word_pieces": first}, rows[offsets[1] : offsets[2]]),
        expected_words[1],
        rtol=1e-6,
    )
