"""Text as people type it: NFKC folding in the Chinese WordPiece tokenizer and
typographic punctuation folding in the English SentencePiece tokenizer.

References are independent of our graph ops: Python's ``unicodedata.normalize``
for NFKC, Hugging Face's fast BERT tokenizer with an NFKC normaliser for ids and
offsets, Hugging Face's ``AlbertTokenizer`` on the exported model for the
punctuation fold, and a fresh process with only TensorFlow and tensorflow-text for
the SavedModel.
"""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
import string
import subprocess
import sys
import unicodedata

import pytest
import tensorflow as tf
import transformers
from helpers.paths import REPO
from helpers.tokenizer_export import SERVE_TOKENIZE, TokenizeExport
from helpers.tokenizer_inputs import HARD_INPUTS

from albert_tf.tokenizers import load_tokenizer
from albert_tf.tokenizers.sentencepiece_training import train_sentencepiece
from albert_tf.tokenizers.wordpiece import WordPieceTokenizer, basic_tokenize, train_wordpiece

SHARED_CORPORA = REPO.parent / "shared" / "data" / "corpus"
# Full-width ASCII, the ideographic space, half-width katakana, circled and
# squared forms, ligatures, superscripts, Roman numerals, CJK compatibility ideographs.
COMPATIBILITY_TEXTS = [
    "".join(chr(c) for c in range(0xFF01, 0xFF5F)),
    "１９９８年，ＡＩ算法。\u3000全角空格",
    "ｶﾀｶﾅ ①②③ ㎏㎞ ﬁﬂ ² ⅫⅣ 豈更 ㈠㈡ ℃ №",
    "算法组的成员们精通各种ＡＩ算法．",
]


def _paragraphs(name: str, count: int = 150) -> list[str]:
    path = SHARED_CORPORA / name
    if not path.is_file():
        pytest.skip(f"{path} is not here (../shared/data holds the shared corpora)")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        docs = [json.loads(line)["sentences"] for line in itertools.islice(fh, count)]
    return [" ".join(sentences)[:500] for sentences in docs]


@pytest.fixture(scope="module")
def nfkc_dir(tmp_path_factory, chinese_lines):
    out = tmp_path_factory.mktemp("wordpiece_nfkc")
    # Full-width text only: the ASCII forms reach the vocabulary by folding and
    # by the reserve.
    lines = chinese_lines + COMPATIBILITY_TEXTS * 5 + ["１９９８年１２月３１日"] * 5
    train_wordpiece(lines, out, vocab_size=2000, num_unused=20)
    return out


@pytest.fixture(scope="module")
def nfkc_tokenizer(nfkc_dir):
    return load_tokenizer(nfkc_dir)


@pytest.mark.parametrize(
    ("name", "prints_full_width"),
    [
        ("zh_peoples_daily_1998.jsonl.gz", True),
        ("zh_libreoffice_help.jsonl.gz", True),
        ("en_web_bible.jsonl.gz", False),
        ("en_sotu.jsonl.gz", False),
    ],
)
def test_nfkc_step_equals_python_nfkc_on_shared_corpora(name, prints_full_width):
    corpus = _paragraphs(name)
    texts = corpus + COMPATIBILITY_TEXTS + HARD_INPUTS
    folded = basic_tokenize(tf.constant(texts), nfkc=True).to_list()
    python = [unicodedata.normalize("NFKC", t) for t in texts]
    assert folded == basic_tokenize(tf.constant(python)).to_list()
    if prints_full_width:  # the comparison saw folding at work on the corpus itself
        assert sum(unicodedata.normalize("NFKC", t) != t for t in corpus) > len(corpus) // 4


def test_trained_vocabulary_folds_full_width_and_reserves_ascii(nfkc_dir, nfkc_tokenizer):
    config = json.loads((nfkc_dir / "tokenizer.json").read_text())
    assert config["nfkc"] is True and nfkc_tokenizer.nfkc
    vocab = set(nfkc_tokenizer.vocabulary)
    ascii_tokens = set(string.ascii_lowercase + string.digits + string.punctuation)
    assert ascii_tokens | {"##" + c for c in string.ascii_lowercase + string.digits} <= vocab
    assert not {t for t in vocab if any(0xFF01 <= ord(c) <= 0xFF5E for c in t)}
    full, half = "１９９８年，ＡＩ算法。", "1998年,AI算法。"
    ids = nfkc_tokenizer.tokenize(tf.constant([full, half, "Zebra 42 quickly!"])).to_list()
    assert ids[0] == ids[1]
    assert nfkc_tokenizer.unk_id not in ids[0] + ids[2]


def test_imported_vocabularies_keep_bert_tokenizer_behaviour(wp_dir, tmp_path):
    # A tokenizer.json without the option (every imported or older one) means off.
    folder = tmp_path / "imported"
    shutil.copytree(wp_dir, folder)
    config = json.loads((folder / "tokenizer.json").read_text())
    config.pop("nfkc", None)
    (folder / "tokenizer.json").write_text(json.dumps(config))
    tokenizer = load_tokenizer(folder)
    assert tokenizer.nfkc is False
    text = "１９９８年ＡＩ"
    bert = transformers.BertTokenizer(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    assert tokenizer.tokenize(tf.constant([text])).to_list()[0] == bert.encode(
        text, add_special_tokens=False
    )


@pytest.fixture(scope="module")
def hf_nfkc_fast(nfkc_dir):
    from tokenizers import normalizers

    fast = transformers.BertTokenizerFast(vocab_file=str(nfkc_dir / "vocab.txt"))
    fast.backend_tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFKC(), normalizers.BertNormalizer(lowercase=True)]
    )
    return fast


def test_nfkc_ids_and_offsets_match_hf_fast_with_an_nfkc_normaliser(
    nfkc_tokenizer, nfkc_dir, hf_nfkc_fast
):
    slow = transformers.BertTokenizer(vocab_file=str(nfkc_dir / "vocab.txt"), do_lower_case=True)
    texts = COMPATIBILITY_TEXTS + HARD_INPUTS + _paragraphs("zh_peoples_daily_1998.jsonl.gz", 60)
    ids, starts, ends = nfkc_tokenizer.tokenize_with_offsets(tf.constant(texts))
    assert ids.to_list() == nfkc_tokenizer.tokenize(tf.constant(texts)).to_list()
    compared = 0
    for i, text in enumerate(texts):
        want = hf_nfkc_fast(text, add_special_tokens=False, return_offsets_mapping=True)
        reference = slow.encode(unicodedata.normalize("NFKC", text), add_special_tokens=False)
        if want["input_ids"] != reference:
            continue  # the Rust tables differ from Python's on a few code points
        compared += 1
        assert ids[i].numpy().tolist() == reference, f"ids differ on {text[:60]!r}"
        got = list(zip(starts[i].numpy().tolist(), ends[i].numpy().tolist(), strict=True))
        assert got == [tuple(o) for o in want["offset_mapping"]], f"offsets on {text[:60]!r}"
    assert compared >= 0.9 * len(texts)


def test_the_hugging_face_export_folds_as_we_do(nfkc_tokenizer, tmp_path):
    from albert_tf.checkpoints.hf_export import write_hf_tokenizer

    files = write_hf_tokenizer(nfkc_tokenizer, str(tmp_path), 128)
    assert "tokenizer.json" in files
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    texts = COMPATIBILITY_TEXTS + ["我爱ＡＬＢＥＲＴ模型，１９９８年。"] + HARD_INPUTS
    ours = nfkc_tokenizer.tokenize(tf.constant(texts)).to_list()
    slow = transformers.BertTokenizer.from_pretrained(tmp_path)  # vocab.txt, no NFKC
    compared = 0
    for text, want in zip(texts, ours, strict=True):
        if theirs.encode(text, add_special_tokens=False) != slow.encode(
            unicodedata.normalize("NFKC", text), add_special_tokens=False
        ):
            continue  # the Rust tables differ from Python's on a few code points
        compared += 1
        assert theirs.encode(text, add_special_tokens=False) == want, text[:60]
    assert compared >= 0.9 * len(texts)
    # And back: the folder's NFKC normaliser makes the converted tokenizer fold.
    from albert_tf.checkpoints.convert import find_tokenizer

    back = find_tokenizer(str(tmp_path))
    assert back.nfkc and back.tokenize(tf.constant(texts)).to_list() == ours


def test_a_savedmodel_folds_in_a_fresh_process(nfkc_tokenizer, tmp_path):
    texts = ["１９９８年，ＡＩ算法。", "1998年,AI算法。", "ｶﾀｶﾅ ① ㎏"]
    tf.saved_model.save(TokenizeExport(nfkc_tokenizer), str(tmp_path / "saved"))
    result = subprocess.run(
        [sys.executable, "-c", SERVE_TOKENIZE, str(tmp_path / "saved"), json.dumps(texts)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served == nfkc_tokenizer.tokenize(tf.constant(texts)).to_list()
    assert served[0] == served[1]
    # Without the option the same vocabulary does not fold.
    plain = WordPieceTokenizer(nfkc_tokenizer._vocab_file)
    unfolded = plain.tokenize(tf.constant(texts[:2])).to_list()
    assert unfolded[0] != unfolded[1]


# -- English: typographic punctuation ---------------------------------------

# Written out here, apart from the library's table.
KEYBOARD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u2007": " ",
        "\u202f": " ",
    }
)
TYPOGRAPHIC_TEXTS = [
    "\u201cIt\u2019s 9\u201310\u00a0am,\u201d she said \u2014 \u2018twice\u2019.",
    "Don\u2019t\u2014stop; \u2018\u2018nested\u2019\u2019 ``ok'' \u2212 5",
    "a\u00a0\u00a0b \u2007 c\u202fd \u201etest\u201f \u2010\u2011\u2012\u2015",
]


@pytest.fixture(scope="module")
def folding_sp(tmp_path_factory, english_lines):
    out = tmp_path_factory.mktemp("spm_folding")
    bible = _paragraphs("en_web_bible.jsonl.gz", 300)  # curly quotes throughout
    return train_sentencepiece(english_lines + bible, out, vocab_size=1500)


def test_sentencepiece_folds_typography_as_a_keyboard_types(folding_sp, sp_tokenizer):
    assert folding_sp.fold_punctuation and not sp_tokenizer.fold_punctuation
    # Folding comes last, after the ``''`` → '"' rule (as the exported model's own
    # normaliser does it): typed text that makes "''" only by folding is left out.
    texts = [t for t in TYPOGRAPHIC_TEXTS if "''" not in t.translate(KEYBOARD).replace("``''", "")]
    typed = [t.translate(KEYBOARD) for t in texts]
    assert len(texts) == 2
    assert (
        folding_sp.tokenize(tf.constant(texts)).to_list()
        == folding_sp.tokenize(tf.constant(typed)).to_list()
    )
    # No piece holds a character that folding removes.
    folded_away = set(KEYBOARD)
    assert not [p for p in folding_sp.vocabulary if set(map(ord, p)) & folded_away]


def test_sentencepiece_folding_survives_the_hugging_face_export(folding_sp, tmp_path):
    from albert_tf.checkpoints.hf_export import write_hf_tokenizer

    write_hf_tokenizer(folding_sp, str(tmp_path), 128)
    theirs = transformers.AlbertTokenizer.from_pretrained(tmp_path)
    texts = TYPOGRAPHIC_TEXTS + HARD_INPUTS + _paragraphs("en_web_bible.jsonl.gz", 40)
    ours = folding_sp.tokenize(tf.constant(texts)).to_list()
    for text, want in zip(texts, ours, strict=True):
        assert theirs.encode(text, add_special_tokens=False) == want, text[:60]


def test_a_model_keeping_a_dash_whole_cannot_fold_on_export(sp_tokenizer):
    from albert_tf.checkpoints.hf_export import check_hf_tokenizer
    from albert_tf.checkpoints.saved_format import CheckpointError
    from albert_tf.tokenizers.sentencepiece import SentencePieceTokenizer

    # The reference recipe keeps "–" as a user-defined piece, which SentencePiece
    # matches before its normaliser: the export says so, before writing anything,
    # instead of folding wrong.
    folding = SentencePieceTokenizer(sp_tokenizer._model_proto, fold_punctuation=True)
    with pytest.raises(CheckpointError, match=r"keeps \['–'\] whole"):
        check_hf_tokenizer(folding)
    check_hf_tokenizer(sp_tokenizer)  # without folding there is nothing to refuse
