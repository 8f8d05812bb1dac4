"""Long texts in overlapping windows: each piece is owned by the window where it has
the most context (BERT's rule, against a brute-force re-implementation), training tags
each piece once, in its owner, and a real tiny tagger finds an entity at every
character offset of a text three windows long as it finds it in a short text, where
windows that do not overlap cut it in two. Also: neighbouring training sentences
joined into texts (`pack_sentences`), and the stride an export records."""

from __future__ import annotations

import json
import random

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.testing_utils import LEARNS, tiny_config

from albert_tf.tasks.tagging.data import Entity, TaggingExample, pack_sentences
from albert_tf.tasks.tagging.model import AlbertTokenClassifier
from albert_tf.tasks.tagging.preprocessing import (
    IGNORED,
    encode_tagging,
    half_window,
    pack_tagging,
)
from albert_tf.tasks.tagging.serving import TaggerServingModule
from albert_tf.tasks.tagging.trainer import TaggingTrainer
from albert_tf.tokenizers import WordPieceTokenizer

FILLER = "的一是在不了有和人这中大为上个国"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *FILLER, "王", "明"]
TAGS = ["O", "B-PER", "I-PER"]
MAX_SEQ_LENGTH = 12  # windows of 10 pieces (one per character here)
WIDTH = MAX_SEQ_LENGTH - 2


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("wordpiece") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return WordPieceTokenizer(path)


def _brute_force(length: int, width: int, stride: int) -> tuple[list, list]:
    """BERT's ``run_squad`` windows and max-context owners by loops: the windows'
    ``(start, length)`` and each piece's owning window."""
    if length == 0:
        return [], []
    starts = [0]
    while starts[-1] + width < length:
        starts.append(starts[-1] + stride)
    windows = [(start, min(width, length - start)) for start in starts]
    owners = []
    for piece in range(length):
        best_score, best = None, None
        for k, (start, n) in enumerate(windows):
            if not start <= piece < start + n:
                continue
            left, right = piece - start, start + n - 1 - piece
            score = min(left, right) + 0.01 * n
            if best_score is None or score > best_score + 1e-9:  # a tie: the earlier
                best_score, best = score, k
        owners.append(best)
    return windows, owners


@pytest.mark.parametrize("max_seq_length", [3, 4, 7, MAX_SEQ_LENGTH])
def test_each_piece_is_owned_where_it_has_the_most_context(tokenizer, max_seq_length):
    width = max_seq_length - 2
    rng = random.Random(max_seq_length)
    for stride in sorted({1, min(2, width), max(1, width // 2), max(1, width - 1), width}):
        # One window or none, exact multiples of the stride past a window, and between.
        lengths = {0, 1, width - 1, width, width + 1, 2 * width, 3 * width + 1}
        lengths |= {width + k * stride for k in (1, 2, 3)} | {width + 2 * stride - 1}
        lengths = sorted(n for n in lengths if 0 <= n <= 40)
        texts = ["".join(rng.choice(FILLER) for _ in range(n)) for n in lengths]
        packed = pack_tagging(tf.constant(texts), tokenizer, max_seq_length, stride)
        owned, mask = packed["owned"].numpy(), packed["padding_mask"].numpy()
        token_ids = packed["token_ids"].numpy()
        window_text = packed["window_text"].numpy()
        window_start = packed["window_start"].numpy()
        assert owned.shape == token_ids.shape and owned.dtype == bool
        assert not (owned & (mask == 0)).any()  # padding is never owned
        ids = packed["piece_ids"].to_list()
        for t, length in enumerate(lengths):
            windows, owners = _brute_force(length, width, stride)
            rows = np.flatnonzero(window_text == t)
            got = [(int(window_start[r]), int(mask[r].sum()) - 2) for r in rows]
            assert got == windows, (stride, length)
            for k, row in enumerate(rows):
                start, n = windows[k]
                assert not owned[row, 0] and not owned[row, n + 1]  # [CLS], [SEP]
                slots = np.flatnonzero(owned[row]) - 1 + start
                want = [p for p in range(start, start + n) if owners[p] == k]
                assert slots.tolist() == want, (stride, length, k)
            # The owned slots, in window order, are the text's pieces in order.
            in_order = [int(token_ids[r, j]) for r in rows for j in np.flatnonzero(owned[r])]
            assert in_order == ids[t], (stride, length)


def test_a_stride_outside_a_window_is_refused_with_the_fix(tokenizer, tmp_path):
    for stride in (0, WIDTH + 1):
        with pytest.raises(ValueError, match=f"give --tagging_stride from 1 to {WIDTH}"):
            pack_tagging(tf.constant(["的"]), tokenizer, MAX_SEQ_LENGTH, stride)
    model = _model(tokenizer, lstm_units=0)
    with pytest.raises(ValueError, match="tagging_stride=11"):
        TaggerServingModule(model, tokenizer, MAX_SEQ_LENGTH, TAGS, stride=11)
    with pytest.raises(ValueError, match="tagging_stride=11"):
        TaggingTrainer(
            model,
            tokenizer,
            tag_names=TAGS,
            output_dir=tmp_path,
            max_seq_length=MAX_SEQ_LENGTH,
            stride=11,
        )


def _long_items(n: int, seed: int) -> list[TaggingExample]:
    """Texts of one to four windows with entities anywhere, at window edges too."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        text = "".join(rng.choice(FILLER) for _ in range(rng.randint(1, 4 * WIDTH)))
        entities = []
        for start in sorted(rng.sample(range(len(text)), min(3, len(text)))):
            if start + 2 <= len(text) and all(start >= e.end + 1 for e in entities):
                text = text[:start] + "王明" + text[start + 2 :]
                entities.append(Entity(start, start + 2, "PER"))
        items.append(TaggingExample(str(i), text, tuple(entities), "zh"))
    return items


@pytest.mark.parametrize("stride", [1, 3, WIDTH // 2, WIDTH - 1])
def test_training_tags_each_piece_once_in_the_window_that_owns_it(tokenizer, stride):
    items = _long_items(12, stride)
    apart = encode_tagging(items, tokenizer, MAX_SEQ_LENGTH, TAGS)  # no overlap: as before
    overlapping = encode_tagging(items, tokenizer, MAX_SEQ_LENGTH, TAGS, stride)
    assert sum(len(x["windows"]) for x in overlapping) > sum(len(x["windows"]) for x in apart)
    for before, after in zip(apart, overlapping, strict=True):
        every_piece = np.concatenate([w["tags"][1:-1] for w in before["windows"]])
        assert all(w["owned"][1:-1].all() for w in before["windows"])
        owned = np.concatenate([w["tags"][w["owned"]] for w in after["windows"]])
        assert owned.tolist() == every_piece.tolist()  # each piece once, in order
        for window in after["windows"]:
            assert (window["tags"][~window["owned"]] == IGNORED).all()
        assert (every_piece != IGNORED).all()  # one piece a character: each is scored


# -- a real tiny tagger whose tags need context --------------------------------------


def _sentences(n: int, seed: int) -> list[TaggingExample]:
    """Short texts in which "王明" is a person, and "王" or "明" alone is not: a tag
    needs the neighbouring character (a lone "王" never precedes "明")."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        text, entities, target = "", [], rng.randint(3, WIDTH)
        while len(text) < target:
            r = rng.random()
            if r < 0.2 and len(text) + 2 <= WIDTH:
                entities.append(Entity(len(text), len(text) + 2, "PER"))
                text += "王明"
            elif r < 0.35:
                text += "王"
            elif r < 0.5 and not text.endswith("王"):
                text += "明"
            else:
                text += rng.choice(FILLER)
        items.append(TaggingExample(f"{seed}-{i}", text, tuple(entities), "zh"))
    return items


def _model(tokenizer, lstm_units: int = 16) -> AlbertTokenClassifier:
    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **LEARNS)
    return AlbertTokenClassifier.from_albert_config(config, num_tags=3, lstm_units=lstm_units)


@pytest.fixture(scope="module")
def tagger(tokenizer, tmp_path_factory):
    """A BiLSTM tagger (the recipe's head) trained on neighbouring sentences joined into
    texts of three windows (`pack_sentences`), read in windows half a window apart."""
    trainer = TaggingTrainer(
        _model(tokenizer),
        tokenizer,
        tag_names=TAGS,
        output_dir=tmp_path_factory.mktemp("windows"),
        max_seq_length=MAX_SEQ_LENGTH,
        stride=WIDTH // 2,
        pack_chars=3 * WIDTH,
        batch_size=32,
        learning_rate=1e-2,
        adam_bias_correction=True,
        num_train_steps=120,
        eval_every=120,
        patience=0,
        progress=False,
    )
    result = trainer.fit(_sentences(1000, 0), _sentences(100, 1))
    return trainer, result


def _found(out: dict, row: int) -> set[tuple[int, int, str]]:
    spans = zip(out["starts"][row], out["ends"][row], out["labels"][row], strict=True)
    return {(int(s), int(e), label.decode()) for s, e, label in spans if s >= 0}


def test_an_entity_at_every_offset_is_found_as_in_a_short_text(tagger, capsys):
    trainer, result = tagger
    assert result["best_f1"] >= 0.95, result["history"]
    with open(f"{result['best_dir']}/finetune.json") as f:
        saved = json.load(f)
    assert saved["tagging_stride"] == WIDTH // 2 and saved["tagging_pack_chars"] == 3 * WIDTH
    rng = random.Random(5)
    base = "".join(rng.choice(FILLER) for _ in range(3 * WIDTH))  # three windows long
    offsets = range(len(base) - 1)
    texts = [base[:o] + "王明" + base[o + 2 :] for o in offsets]
    short = "的一是王明的一"
    model = trainer.model
    module = TaggerServingModule(model, trainer.tokenizer, MAX_SEQ_LENGTH, TAGS, WIDTH // 2)
    out = {k: v.numpy() for k, v in module.serving_default(tf.constant([short, *texts])).items()}
    assert _found(out, 0) == {(3, 5, "PER")}
    for o in offsets:
        assert _found(out, o + 1) == {(o, o + 2, "PER")}, o
    # The trainer's evaluation reads the same windows and owners.
    items = [TaggingExample(str(o), texts[o], (Entity(o, o + 2, "PER"),)) for o in offsets]
    assert trainer.evaluate(items)["f1"] == 1.0
    # Windows that do not overlap (exports made before strides) cut the entity at
    # their edges: its characters there are read without the other one.
    apart = TaggerServingModule(model, trainer.tokenizer, MAX_SEQ_LENGTH, TAGS)
    out = {k: v.numpy() for k, v in apart.serving_default(tf.constant(texts)).items()}
    missed = [o for o in offsets if _found(out, o) != {(o, o + 2, "PER")}]
    assert missed and set(missed) <= {WIDTH - 1, 2 * WIDTH - 1}, missed


def test_the_export_records_the_stride_and_old_runs_keep_theirs(tokenizer):
    model = _model(tokenizer, lstm_units=0)
    settings = {"label_names": TAGS, "tagging_stride": 4}
    module, metadata, _ = TaggerServingModule.for_export(model, tokenizer, settings, 12)
    assert module.stride == metadata["tagging_stride"] == 4
    # A run recorded before strides: windows that do not overlap, as it was trained.
    old = {"label_names": TAGS}
    module, metadata, _ = TaggerServingModule.for_export(model, tokenizer, old, 12)
    assert module.stride == metadata["tagging_stride"] == WIDTH
    # Exported with a shorter max_seq_length than trained with: at most a window.
    settings["tagging_stride"] = 60
    with pytest.warns(UserWarning, match="windows that do not overlap"):
        module, metadata, _ = TaggerServingModule.for_export(model, tokenizer, settings, 8)
    assert module.stride == metadata["tagging_stride"] == 6
    assert half_window(MAX_SEQ_LENGTH) == WIDTH // 2 and half_window(13) == 6


def test_neighbouring_sentences_are_joined_and_none_is_lost():
    pd = [  # People's Daily style: one sentence a row, in article order
        TaggingExample("pd-1", "江泽民在北京。", (Entity(0, 3, "PER"), Entity(4, 6, "LOC")), "zh"),
        TaggingExample("pd-2", "１２月３１日，新华社报道。", (Entity(8, 11, "ORG"),), "zh"),
        TaggingExample("pd-3", "他说：", (), "zh"),
        TaggingExample("pd-4", "很长的句子" * 10, (Entity(0, 2, "LOC"),), "zh"),
        TaggingExample("pd-5", "未标注的句子。", (), "zh", labelled=False),
        TaggingExample("pd-6", "李鹏到上海。", (Entity(0, 2, "PER"), Entity(3, 5, "LOC")), "zh"),
        TaggingExample("en-1", "Smith met Jones", (Entity(0, 5, "PER"), Entity(10, 15, "PER"))),
        TaggingExample("en-2", "in Paris.", (Entity(3, 8, "LOC"),)),
    ]
    packed = pack_sentences(pd, 30)
    assert [x.id for x in packed] == ["pd-1+pd-2+pd-3", "pd-4", "pd-5", "pd-6", "en-1+en-2"]
    assert packed[0].text == "江泽民在北京。１２月３１日，新华社报道。他说："  # no separator
    assert packed[-1].text == "Smith met Jones in Paris."  # one space between words
    assert packed[2].labelled is False and packed[1] is pd[3]  # alone, as they were
    surfaces = [(x.text[e.start : e.end], e.label) for x in packed for e in x.entities]
    assert surfaces == [
        (x.text[e.start : e.end], e.label) for x in pd for e in x.entities
    ]  # every entity, shifted with its sentence
    assert all(len(x.text) <= 30 for x in packed if "+" in x.id)
    pairs = pack_sentences(pd, 1000, max_items=2)
    assert [x.id for x in pairs] == ["pd-1+pd-2", "pd-3+pd-4", "pd-5", "pd-6", "en-1+en-2"]
    with pytest.raises(ValueError, match="must be at least 1"):
        pack_sentences(pd, 0)
    # Full-width digits on both sides of a join would read as one number: a space.
    digits = [TaggingExample("a", "共１９９８", (), "zh"), TaggingExample("b", "１２月", (), "zh")]
    assert pack_sentences(digits, 100)[0].text == "共１９９８ １２月"
