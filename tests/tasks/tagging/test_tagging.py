"""Named-entity tagging end to end: pieces get the BIO tags of the characters they
cover (the first piece of a word; each Chinese character), the tagger learns a
learnable task and keeps its best checkpoint, the raw-text SavedModel finds the
trainer's entities in a fresh process that imports only tensorflow and
tensorflow_text, and the finetune command does it all from files."""

from __future__ import annotations

import collections
import itertools
import json
import random
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.serving_scripts import OP_SCAN
from helpers.testing_utils import LEARNS, tiny_config

from albert_tf.serving import export_saved_model
from albert_tf.tasks.tagging.data import Entity, TaggingExample
from albert_tf.tasks.tagging.decoding import chunks, tag_names
from albert_tf.tasks.tagging.model import AlbertTokenClassifier
from albert_tf.tasks.tagging.preprocessing import IGNORED, encode_tagging, pack_tagging
from albert_tf.tasks.tagging.trainer import TaggingTrainer
from albert_tf.tokenizers import WordPieceTokenizer, load_tokenizer
from albert_tf.training.finetuning.metrics import entity_scores

PEOPLE = ["王明", "李华", "张国平", "刘伟", "陈芳", "Albert", "Smith"]
PLACES = ["北京", "上海", "广州", "南京", "成都"]
ORGS = ["人民大学", "科技公司", "动物园"]
TEMPLATES = [
    "{PER}在{LOC}工作。",
    "{ORG}的{PER}来到{LOC}。",
    "昨天{PER}说，{LOC}很好。",
    "我们去{LOC}看{ORG}。",
    "今年{PER}和{PER}都在{ORG}。",
]
TAGS = tag_names(["LOC", "ORG", "PER"])
MAX_SEQ_LENGTH = 24


def _sentences(n: int, seed: int) -> list[TaggingExample]:
    rng = random.Random(seed)
    pools = {"PER": PEOPLE, "LOC": PLACES, "ORG": ORGS}
    items = []
    for i in range(n):
        template = rng.choice(TEMPLATES)
        text, entities, rest = "", [], template
        while "{" in rest:
            before, _, after = rest.partition("{")
            label, _, rest = after.partition("}")
            text += before
            name = rng.choice(pools[label])
            entities.append(Entity(len(text), len(text) + len(name), label))
            text += name
        items.append(TaggingExample(f"{seed}-{i}", text + rest, tuple(entities), "zh"))
    return items


@pytest.fixture(scope="module")
def tokenizer(mc_models):
    return load_tokenizer(mc_models["zh"]["model"] / "tokenizer")


def _model(tokenizer, num_tags=7):
    keras.utils.set_random_seed(0)
    config = tiny_config(
        vocab_size=tokenizer.vocabulary_size,
        **LEARNS,
        classifier_dropout_prob=0.0,
    )
    return AlbertTokenClassifier.from_albert_config(config, num_tags=num_tags)


def _trainer(model, tokenizer, tmp_path, **kwargs):
    settings = dict(
        output_dir=tmp_path / "run",
        max_seq_length=MAX_SEQ_LENGTH,
        batch_size=16,
        learning_rate=2e-3,
        num_train_steps=240,
        eval_every=60,
        patience=0,
        progress=False,
        tag_names=TAGS,
    )
    return TaggingTrainer(model, tokenizer, **(settings | kwargs))


@pytest.fixture(scope="module")
def tagger(tokenizer, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tagger")
    trainer = _trainer(_model(tokenizer), tokenizer, tmp_path)
    result = trainer.fit(_sentences(400, 0), _sentences(80, 1))
    return trainer, result, tmp_path


def test_pieces_get_the_tags_of_their_words(tokenizer):
    item = TaggingExample("x", "昨天Smith在北京。", (Entity(2, 7, "PER"), Entity(8, 10, "LOC")))
    (encoded,) = encode_tagging([item], tokenizer, 64, TAGS)
    (window,) = encoded["windows"]
    pieces = [p.decode() for p in tokenizer.id_to_token(tf.constant(window["token_ids"])).numpy()]
    tags = ["-" if t == IGNORED else TAGS[t] for t in window["tags"]]
    # "smith" is several pieces: only its first is tagged; each CJK character is a word.
    smith = [i for i, p in enumerate(pieces) if p.startswith("##")]
    assert smith, pieces  # the vocabulary splits "smith"
    assert all(tags[i] == "-" for i in smith)
    assert tags[smith[0] - 1] == "B-PER"
    assert [t for t in tags if t != "-"] == ["O", "O", "B-PER", "O", "B-LOC", "I-LOC", "O"]
    assert tags[0] == tags[-1] == "-"  # [CLS], [SEP]
    assert encoded["entities"] == {(2, 7, "PER"), (8, 10, "LOC")}
    assert encoded["lost"] == 0


def test_sentencepiece_words_get_their_entities_tags(mc_models):
    # English ALBERT's SentencePiece: "▁" pieces start words, punctuation is split
    # off (BERT's words); a piece's span leaves out the space before it. So
    # entities at word boundaries are never lost, and gold tags decode to gold spans.
    english = load_tokenizer(mc_models["en"]["model"] / "tokenizer")
    text = "Yesterday  JOHN Smith-Jones flew to New York, then to Zürich’s airport."
    names = {"JOHN Smith-Jones": "PER", "New York": "LOC", "Zürich": "LOC"}
    entities = tuple(
        Entity(text.index(name), text.index(name) + len(name), label)
        for name, label in names.items()
    )
    (encoded,) = encode_tagging([TaggingExample("x", text, entities, "en")], english, 64, TAGS)
    assert encoded["lost"] == 0
    spans = zip(encoded["word_start_chars"], encoded["word_end_chars"], strict=True)
    words = " ".join(text[a:b] for a, b in spans)
    assert words == "Yesterday JOHN Smith - Jones flew to New York , then to Zürich ’ s airport ."
    (window,) = encoded["windows"]
    word_tags = [TAGS[t] for t in window["tags"] if t != IGNORED]
    assert word_tags[1:5] == ["B-PER", "I-PER", "I-PER", "I-PER"]
    starts, ends = encoded["word_start_chars"], encoded["word_end_chars"]
    found = {(starts[first], ends[last], label) for label, first, last in chunks(word_tags)}
    assert found == encoded["entities"]


def test_long_texts_are_cut_into_windows_that_keep_every_piece(tokenizer):
    texts = ["王明在北京工作。" * 9, "", "李华来到上海。"]
    packed = pack_tagging(tf.constant(texts), tokenizer, 16)
    ids = tokenizer.tokenize(tf.constant(texts)).to_list()
    window_text = packed["window_text"].numpy().tolist()
    mask = packed["padding_mask"].numpy().astype(bool)
    token_ids = packed["token_ids"].numpy()
    windows = [row[m][1:-1].tolist() for row, m in zip(token_ids, mask, strict=True)]
    assert window_text == [0] * -(-len(ids[0]) // 14) + [2]  # the empty text has none
    assert all(len(w) <= 14 for w in windows)
    for text, want in enumerate(ids):
        got = [p for w, t in zip(windows, window_text, strict=True) if t == text for p in w]
        assert got == want
    assert packed["piece_starts"].to_list()[2][:3] == [0, 1, 2]


def test_tagger_learns_entities_and_keeps_its_best(tagger):
    trainer, result, _ = tagger
    assert result["metric"] == "f1"
    assert result["best_f1"] >= 0.9, result["history"]
    with open(f"{result['best_dir']}/finetune.json") as f:
        saved = json.load(f)
    assert saved["task"] == "tagging" and saved["label_names"] == TAGS
    scores = trainer.evaluate(_sentences(60, 2))
    assert scores["f1"] >= 0.9 and scores["count"] == 60
    assert set(scores["per_label"]) == {"LOC", "ORG", "PER"}


def test_wrong_tags_are_named(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="5 tag names for a model with 7 tags"):
        _trainer(_model(tokenizer), tokenizer, tmp_path, tag_names=TAGS[:5])
    with pytest.raises(ValueError, match=r"tags \['X'\] are not 'O' or 'B-X'"):
        _trainer(_model(tokenizer, 3), tokenizer, tmp_path, tag_names=["B-X", "X", "O"])
    with pytest.raises(ValueError, match="there is no 'O' tag"):
        _trainer(_model(tokenizer, 2), tokenizer, tmp_path, tag_names=["B-X", "I-X"])
    # Any order is fine (a converted tagger's id2label): O last here.
    _trainer(_model(tokenizer, 3), tokenizer, tmp_path, tag_names=["B-X", "I-X", "O"])
    item = TaggingExample("x", "王明", (Entity(0, 2, "MISC"),))
    with pytest.raises(ValueError, match=r"entity labels \['MISC'\] are not among"):
        encode_tagging([item], tokenizer, 16, TAGS)
    # Training writes BIO tags: a BIOES tagger without I-PER cannot be trained on.
    person = TaggingExample("y", "王明", (Entity(0, 2, "PER"),))
    with pytest.raises(ValueError, match=r"the model has no \['I-PER'\]"):
        encode_tagging([person], tokenizer, 16, ["O", "B-PER", "E-PER", "S-PER"])


_SERVE = (
    OP_SCAN
    + r"""
model = tf.saved_model.load(spec["path"])
serve = model.signatures["serving_default"]
def run(texts):
    out = serve(text=tf.constant(texts, tf.string))
    return {k: (v.numpy().astype(str) if v.dtype == tf.string else v.numpy()).tolist()
            for k, v in out.items()}
report["answer"] = run(spec["text"])
report["empty"] = {k: list(v.shape) for k, v in serve(text=tf.constant([], tf.string)).items()}
report["blank"] = run(["", ""])
try:
    serve(text=tf.constant(["x" * 20001]))
    report["too_long"] = "no error"
except tf.errors.InvalidArgumentError as err:
    report["too_long"] = err.message
report["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print(json.dumps(report))
"""
)


def _served(path: str, texts: list[str], tmp_path) -> dict:
    """`_SERVE`'s report on ``texts`` from the export at ``path``, in a fresh process
    that imports only tensorflow and tensorflow_text and registers every op."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"path": path, "text": texts}))
    run = subprocess.run(
        [sys.executable, "-c", _SERVE, str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # albert_tf must not be importable by accident
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["albert_tf_imported"] is False and report["unregistered"] == []
    return report


def test_saved_model_finds_the_trainers_entities_in_a_fresh_process(tagger, tmp_path):
    trainer, result, _ = tagger
    path = export_saved_model(result["best_dir"], tmp_path / "exported" / "ner", version=1)
    extra = tmp_path / "exported/ner/1/assets.extra"
    assert json.loads((extra / "labels.json").read_text()) == TAGS
    metadata = json.loads((extra / "albert_tf.json").read_text())
    assert metadata["task"] == "tagging" and metadata["limits"]["max_text_chars"] == 20000
    # The trainer's default stride, half a window, is what the export reads with.
    assert metadata["tagging_stride"] == trainer.stride == 11
    items = _sentences(6, 3)
    # Longer than one window of 22 pieces: entities in the second window count too
    # (windows 11 pieces apart, each piece read where it has the most context).
    long = TaggingExample("long", "。".join(x.text for x in items[:4]), ())
    texts = [x.text for x in items] + [long.text, "", "no entity here"]
    report = _served(path, texts, tmp_path)
    assert report["tf_text"]  # the in-graph tokenizer's ops
    best = TaggingTrainer(
        AlbertTokenClassifier.from_config(trainer.model.get_config()),
        trainer.tokenizer,
        tag_names=TAGS,
        output_dir=tmp_path / "unused",
        max_seq_length=MAX_SEQ_LENGTH,
    )
    from albert_tf.checkpoints.saved_format import load_task_model

    best.model.set_weights(load_task_model(result["best_dir"], "tagging").get_weights())
    blank, plain = TaggingExample("e", "", ()), TaggingExample("n", texts[-1], ())
    want = best.predict([*items, long, blank, plain])
    got = report["answer"]
    assert len(got["starts"]) == len(texts)
    for row, entities in enumerate(want):
        n = len(entities)
        assert [(e.start, e.end, e.label) for e, _ in entities] == list(
            zip(got["starts"][row][:n], got["ends"][row][:n], got["labels"][row][:n], strict=True)
        )
        assert got["starts"][row][n:] == [-1] * (len(got["starts"][row]) - n)
        assert got["labels"][row][n:] == [""] * (len(got["labels"][row]) - n)
        np.testing.assert_allclose(got["scores"][row][:n], [s for _, s in entities], atol=1e-4)
    assert len(want[len(items)]) > 6  # the long text's entities, over both windows
    # The model learned: most of the test items' own entities come back.
    found = [
        set(zip(got["starts"][row], got["ends"][row], got["labels"][row], strict=True))
        - {(-1, -1, "")}
        for row in range(len(items))
    ]
    gold = [{(e.start, e.end, e.label) for e in item.entities} for item in items]
    assert entity_scores(gold, found)["f1"] >= 0.75, (texts, found)
    assert report["empty"] == {"starts": [0, 0], "ends": [0, 0], "labels": [0, 0], "scores": [0, 0]}
    assert report["blank"]["starts"] == [[], []]
    assert "text length exceeds the serving limit of 20,000" in report["too_long"]


def test_finetune_command_tags_from_files(tokenizer, mc_models, tmp_path):
    rows = [
        {
            "id": item.id,
            "text": item.text,
            "entities": [
                {
                    "start": e.start,
                    "end": e.end,
                    "label": e.label,
                    "text": item.text[e.start : e.end],
                }
                for e in item.entities
            ],
        }
        for item in _sentences(200, 4)
    ]
    rows[0]["entities"][0]["text"] = "wrong"
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\nnot json\n")
    config = tmp_path / "config.json"
    _model(tokenizer).config.to_hf_json(config)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.finetune",
            "--task=tagging",
            f"--init_config={config}",
            f"--tokenizer_dir={mc_models['zh']['model'] / 'tokenizer'}",
            f"--train_files={data}",
            f"--output_dir={tmp_path / 'run'}",
            f"--export_dir={tmp_path / 'exported'}",
            "--max_seq_length=24",
            "--num_train_steps=6",
            "--eval_every=3",
            "--batch_size=8",
            "--tagger_crf",
            "--tagger_crf_learning_rate=1e-2",
            "--tagging_stride=7",
            "--tagging_pack_chars=60",
            "--progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    from albert_tf.checkpoints.saved_format import read_finetune_settings, read_weights

    assert "tagger_head/crf/transitions" in read_weights(tmp_path / "run" / "best")
    # The CRF's own rate, 1e-2 against the run's default 1e-5: a factor of 1,000.
    saved = read_finetune_settings(tmp_path / "run" / "best")
    assert saved["learning_rate_multipliers"] == {"crf/": pytest.approx(1000.0)}
    assert saved["tagging_stride"] == 7 and saved["tagging_pack_chars"] == 60
    assert "texts joined in order into" in run.stdout  # training sentences only
    assert "skipped 2 bad input(s): {'entity_text_mismatch': 1, 'invalid_json': 1}" in run.stdout
    assert "train: " in run.stdout and "entities {'LOC':" in run.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metric"] == "f1" and summary["steps"] == 6
    assert {"precision", "recall", "f1", "per_label"} <= set(summary["test"])
    # The gazetteer knows every name of these templates: it finds nearly all.
    assert summary["test_gazetteer"]["f1"] > 0.9
    extra = tmp_path / "exported" / "1" / "assets.extra"
    assert json.loads((extra / "labels.json").read_text()) == TAGS
    assert json.loads((extra / "albert_tf.json").read_text())["tagging_stride"] == 7
    card = json.loads((extra / "model_card.json").read_text())
    assert card["task"] == "named entities: LOC, ORG, PER"
    assert card["held_out"]["f1"] == summary["test"]["f1"]
    assert card["held_out"]["gazetteer_f1"] == summary["test_gazetteer"]["f1"]


# A Hugging Face tagger's id2label may come in any order and scheme: BIOES here.
BIOES_TAGS = ["S-PER", "I-LOC", "O", "E-ORG", "B-PER", "S-LOC", "I-ORG", "E-PER"]
BIOES_TAGS += ["B-LOC", "I-PER", "B-ORG", "E-LOC", "S-ORG"]


@pytest.mark.parametrize("tags", [TAGS, BIOES_TAGS], ids=["bio", "bioes_shuffled"])
def test_graph_decoding_equals_seqeval_chunks_on_any_tags(tokenizer, tags):
    # The SavedModel's decoding (the trainer's too) against seqeval's chunking of the
    # same word tags, on random tags, ill-formed ones included (I- after O, a type
    # switch, an entity running to the end of one text before a text that opens with
    # I- of the same type; E-/S- closing one).
    get_entities = pytest.importorskip("seqeval.metrics.sequence_labeling").get_entities
    from albert_tf.tasks.tagging.preprocessing import word_spans
    from albert_tf.tasks.tagging.serving import TaggerServingModule

    module = TaggerServingModule(
        _model(tokenizer, num_tags=len(tags)), tokenizer, MAX_SEQ_LENGTH, tags
    )
    texts = [x.text for x in _sentences(12, 5)] + ["", "王明Smith在北京。"]
    packed = pack_tagging(tf.constant(texts), tokenizer, MAX_SEQ_LENGTH)
    rng = np.random.RandomState(0)
    pieces = int(packed["piece_ids"].flat_values.shape[0])
    probabilities = rng.dirichlet(np.full(len(tags), 0.3), size=pieces).astype("float32")
    got = {k: v.numpy() for k, v in module.decode(tf.constant(probabilities), packed).items()}
    chosen = probabilities.argmax(-1)
    offset = 0
    for row, length in enumerate(packed["piece_ids"].row_lengths().numpy()):
        starts = packed["piece_starts"][row].numpy()
        ends = packed["piece_ends"][row].numpy()
        first, word_starts, word_ends = word_spans(starts, ends, packed["word_starts"][row].numpy())
        word_tags = [tags[t] for t in chosen[offset + first]]
        want = [(word_starts[a], word_ends[b], kind) for kind, a, b in get_entities(word_tags)]
        n = len(want)
        labels = [label.decode() for label in got["labels"][row][:n]]
        spans = zip(got["starts"][row][:n], got["ends"][row][:n], labels, strict=True)
        assert list(spans) == want, row
        assert (got["starts"][row][n:] == -1).all() and (got["labels"][row][n:] == b"").all()
        scores = probabilities[offset + first, chosen[offset + first]]
        means = [scores[a : b + 1].mean() for _, a, b in get_entities(word_tags)]
        np.testing.assert_allclose(got["scores"][row][:n], means, rtol=1e-6)
        offset += length
    assert sum(got["starts"].ravel() >= 0) > 20  # the random tags made many entities


def test_refused_input_is_named(tokenizer, mc_models, tmp_path):
    vocab = mc_models["zh"]["model"] / "tokenizer" / "vocab.txt"
    cased = WordPieceTokenizer(vocab, lower_case=False)
    with pytest.raises(ValueError, match="tagging needs each piece's characters"):
        _trainer(_model(cased), cased, tmp_path)
    trainer = _trainer(_model(tokenizer), tokenizer, tmp_path)
    unlabelled = [TaggingExample("u", "王明在北京", (), "zh", labelled=False)]
    with pytest.raises(ValueError, match="evaluate\\(\\) needs annotated texts"):
        trainer.evaluate(unlabelled)
    assert len(trainer.predict(unlabelled)) == 1  # predict() tags unannotated text


@pytest.mark.parametrize("crf", [False, True], ids=["softmax", "crf"])
def test_tagger_trains_with_xla(tokenizer, tmp_path, crf):
    # Under XLA the ids are padded to a multiple of 64; the per-piece tags must follow
    # (a CRF's chain skips the padding: argsort and scan inside the compiled step).
    model = _model(tokenizer)
    if crf:
        model = AlbertTokenClassifier(model.backbone, num_tags=7, crf=True)
    trainer = _trainer(
        model, tokenizer, tmp_path, jit_compile=True, num_train_steps=2, eval_every=2
    )
    result = trainer.fit(_sentences(16, 6), _sentences(8, 7))
    assert result["steps"] == 2 and np.isfinite(result["history"][-1]["train_loss"])
    assert 0.0 <= result["history"][-1]["dev_f1"] <= 1.0


def test_bilstm_head_reads_each_text_alone_reloads_and_serves_alike(tokenizer, tmp_path):
    # --tagger_lstm_units: a BiLSTM between the encoder and the tag layer.
    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **LEARNS)
    model = AlbertTokenClassifier.from_albert_config(config, num_tags=7, lstm_units=8)
    trainer = _trainer(model, tokenizer, tmp_path, num_train_steps=60, eval_every=60)
    result = trainer.fit(_sentences(200, 0), _sentences(40, 1))
    # Padding never reaches a text's pieces: alone or beside a longer text, equal logits.
    short, long = _sentences(2, 5)[0].text, "。".join(x.text for x in _sentences(3, 6))
    alone = pack_tagging(tf.constant([short]), tokenizer, MAX_SEQ_LENGTH)
    beside = pack_tagging(tf.constant([short, long]), tokenizer, MAX_SEQ_LENGTH)
    n = int(alone["padding_mask"].numpy().sum())
    assert beside["padding_mask"].shape[1] > n
    inputs = ("token_ids", "segment_ids", "padding_mask")
    logits_alone = trainer.model({k: alone[k] for k in inputs})[0, :n]
    logits_beside = trainer.model({k: beside[k] for k in inputs})[0, :n]
    # Only the summation order differs (other batch and padded shapes): float32 rounding
    # over reductions of at most a few hundred terms, through 2 layers and the LSTM's
    # steps, stays near 1e-5 of the values' magnitude; 1e-4 of it leaves room for any
    # CPU's kernels, while padding read by the LSTM would move logits by far more.
    scale = float(np.abs(logits_alone).max())
    np.testing.assert_allclose(logits_alone, logits_beside, rtol=1e-4, atol=1e-4 * scale)

    from albert_tf.checkpoints.hf_export import export_hf
    from albert_tf.checkpoints.saved_format import CheckpointError, load_task_model

    reloaded = load_task_model(result["best_dir"], "tagging")
    assert reloaded.lstm_units == 8 and reloaded.num_tags == 7
    # finetune without --tagger_lstm_units continues the tagger with the head it has.
    from albert_tf.tasks.tagging.task import TaggingTask
    from albert_tf.tasks.task import TaskData

    data = TaskData([], None, None, collections.Counter(), TAGS)
    assert TaggingTask().load_model(result["best_dir"], None, data).lstm_units == 8
    with pytest.raises(CheckpointError, match="lstm_units=8, not lstm_units=0"):
        load_task_model(result["best_dir"], "tagging", head_arguments={"lstm_units": 0})
    with pytest.raises(Exception, match="tagger_head/lstm"):
        export_hf(str(result["best_dir"]), str(tmp_path / "hf"))

    items = _sentences(6, 3)
    path = export_saved_model(result["best_dir"], tmp_path / "exported" / "ner", version=1)
    report = _served(path, [x.text for x in items], tmp_path)
    trainer.model.set_weights(reloaded.get_weights())
    want = trainer.predict(items)
    got = report["answer"]
    assert sum(len(e) for e in want) > 0
    for row, entities in enumerate(want):
        spans = [(e.start, e.end, e.label) for e, _ in entities]
        n = len(spans)
        assert spans == list(
            zip(got["starts"][row][:n], got["ends"][row][:n], got["labels"][row][:n], strict=True)
        )


def test_crf_tagger_decodes_chains_alike_in_trainer_and_fresh_process(tokenizer, tmp_path):
    # --tagger_crf: trained on the chain's likelihood, decoded by Viterbi everywhere.
    from albert_tf.checkpoints.hf_export import export_hf
    from albert_tf.checkpoints.saved_format import CheckpointError, load_task_model, save_model
    from albert_tf.tasks.tagging.task import TaggingTask
    from albert_tf.tasks.task import TaskData

    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **LEARNS)
    model = AlbertTokenClassifier.from_albert_config(config, num_tags=7, crf=True)
    trainer = _trainer(model, tokenizer, tmp_path, num_train_steps=60, eval_every=60)
    before = model.tagger_head.crf.transitions.numpy().copy()
    result = trainer.fit(_sentences(200, 0), _sentences(40, 1))
    assert np.isfinite(result["history"][-1]["train_loss"])
    reloaded = load_task_model(result["best_dir"], "tagging")
    assert reloaded.crf and reloaded.num_tags == 7
    assert not np.allclose(reloaded.tagger_head.crf.transitions.numpy(), before)  # it learned
    data = TaskData([], None, None, collections.Counter(), TAGS)
    assert TaggingTask().load_model(result["best_dir"], None, data).crf
    with pytest.raises(CheckpointError, match="crf=True, not crf=False"):
        load_task_model(result["best_dir"], "tagging", head_arguments={"crf": False})
    with pytest.raises(Exception, match="tagger_head/crf"):
        export_hf(str(result["best_dir"]), str(tmp_path / "hf"))

    # Transitions that forbid an entity's inside after O or after another type, and
    # push B- → B- down: chains then differ from the per-word argmax.
    inside = {t: TAGS.index(f"I-{t}") for t in ("LOC", "ORG", "PER")}
    transitions = np.zeros((7, 7), "float32")
    for kind, i in inside.items():
        for previous in range(7):
            if TAGS[previous] not in (f"B-{kind}", f"I-{kind}"):
                transitions[previous, i] = -30.0
    start = np.zeros(7, "float32")
    start[list(inside.values())] = -30.0
    reloaded.tagger_head.crf.transitions.assign(transitions)
    reloaded.tagger_head.crf.start.assign(start)
    save_model(reloaded, result["best_dir"])
    trainer.model.set_weights(reloaded.get_weights())

    items = _sentences(6, 3)
    long = TaggingExample("long", "。".join(x.text for x in items[:4]), ())
    texts = [x.text for x in items] + [long.text, "", "李王 北京上海 动物"]
    examples = [*items, long, *(TaggingExample(f"x{i}", t, ()) for i, t in enumerate(texts[-2:]))]
    encoded = trainer._encoded(examples)
    probabilities, _ = trainer._piece_probabilities(encoded)
    chains = [np.array(found["tags"]) for found in trainer._decode(encoded, probabilities)]
    greedy = [p[e["word_pieces"]].argmax(-1) for e, p in zip(encoded, probabilities, strict=True)]
    assert any((c != g).any() for c, g in zip(chains, greedy, strict=True))
    for chain in chains:  # no chain breaks the transitions' rules
        assert all(start[tag] == 0 for tag in chain[:1])
        assert all(transitions[a, b] == 0 for a, b in itertools.pairwise(chain))

    path = export_saved_model(result["best_dir"], tmp_path / "exported" / "ner", version=1)
    report = _served(path, texts, tmp_path)
    assert report["empty"]["starts"] == [0, 0] and report["blank"]["starts"] == [[], []]
    want = trainer.predict(examples)
    got = report["answer"]
    assert sum(len(e) for e in want) > 0
    for row, entities in enumerate(want):
        n = len(entities)
        assert [(e.start, e.end, e.label) for e, _ in entities] == list(
            zip(got["starts"][row][:n], got["ends"][row][:n], got["labels"][row][:n], strict=True)
        )
        np.testing.assert_allclose(got["scores"][row][:n], [s for _, s in entities], atol=1e-4)
        assert got["labels"][row][n:] == [""] * (len(got["labels"][row]) - n)
