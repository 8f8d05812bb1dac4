"""The on-device (LiteRT) export: packed ids equal `pack_multiple_choice`'s on
real items, float32 probabilities equal the Keras model's, int8 mostly agrees,
and the file holds builtin ops plus tensorflow-text's kernels only (no Flex)."""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import albert_budget
from helpers.paths import REPO

import albert_tf
from albert_tf.serving.litert import LiteRTMultipleChoice, custom_op_names, export_litert
from albert_tf.tasks.multiple_choice.data import pack_multiple_choice
from albert_tf.tokenizers import load_tokenizer

DATA = REPO.parent / "shared" / "data" / "multiple_choice"
SEQ, QA, OPTIONS, ITEMS = 96, 32, 5, 50
LONG = "The quick brown fox, born in 1,999, jumps over the lazy dog. " * 30
LONG_ZH = "算法组的成员们精通各种AI算法，他们主要负责研究和落地。" * 20
# tensorflow-text's TFLite kernels (tensorflow_text.tflite_registrar)
TF_TEXT_OPS = {
    "TFText>ByteSplitWithOffsets",
    "TFText>ByteSplitByOffsets",
    "TFText>FastSentencepieceTokenize",
    "TFText>FastSentencepieceDetokenize",
    "FastWordpieceTokenizeWithOffsets",
}


def _items(name: str, n: int = ITEMS) -> list[dict]:
    path = DATA / f"{name}.jsonl.gz"
    if not path.exists():
        pytest.skip(f"shared multiple-choice data not found at {DATA} (see its README)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in itertools.islice(f, n)]


def _real_items(lang: str) -> list[dict]:
    if lang == "zh":
        items = _items("parable_zh")
    else:
        # parable: long contexts; quartz: blanks ("_____": the option five times, glued);
        # socialiqa: no question.
        quartz = _items("quartz", 20)
        items = _items("parable_en", 30) + quartz + _items("socialiqa_evals", 10)
    if lang == "zh":
        return items + [
            {"context": LONG_ZH, "question": "他们负责什么？", "options": ["研究", "落地"]},
            {"context": "", "question": LONG_ZH, "options": ["AI", LONG_ZH]},
            {
                "context": "我爱ALBERT！Café\u200b，ＡＢＣ\x0b",
                "question": "",
                "options": ["NBA", "😀"],
            },
            # Compatibility forms, which a tokenizer trained here folds (NFKC).
            {
                "context": "１９９８年，ＡＩ①㎏ ｶﾀｶﾅ ﬁ",
                "question": "",
                "options": ["1998年", "ＡＩ"],
            },
        ]
    return items + [
        {"context": LONG, "question": "What jumps?", "options": ["the fox", "the dog"]},
        {"context": "", "question": LONG, "options": ["a", LONG]},  # qa truncated too
        {"context": "Café ``naïve'' ΣΑΣ 1,000", "question": "", "options": ["Ⅻ ﬁ", "İ"]},
        {"context": "x", "question": "(_) a_b _ing 9,_, ``_''", "options": ["More", "l"]},
        # Typographic punctuation, which a tokenizer trained here folds.
        {
            "context": "\u201cIt\u2019s 9\u201310\u00a0am\u201d "
            "\u2014 \u2018\u2018twice\u2019\u2019",
            "question": "",
            "options": ["don\u2019t", "a\u2212b"],
        },
    ]


@pytest.fixture(scope="module")
def exported(mc_models, tmp_path_factory):
    """{(lang, context_keep, precision): LiteRTMultipleChoice} of the tiny models."""
    root = tmp_path_factory.mktemp("litert")
    runners = {}
    for lang in ("en", "zh"):
        source = mc_models[lang]["model"]
        for keep in ("start", "end"):
            model_dir = root / f"{lang}_{keep}"
            shutil.copytree(source, model_dir)
            settings = json.loads((source / "finetune.json").read_text())
            (model_dir / "finetune.json").write_text(json.dumps(settings | {"context_keep": keep}))
            # int8 for English only: each export costs ~5 s of the test's budget.
            precisions = ("float32", "int8") if (lang, keep) == ("en", "start") else ("float32",)
            for precision in precisions:
                path = export_litert(
                    model_dir,
                    root / f"{lang}_{keep}_{precision}.tflite",
                    precision=precision,
                    max_options=OPTIONS,
                )
                runners[lang, keep, precision] = LiteRTMultipleChoice(path, num_threads=2)
    return runners


@functools.cache
def _tokenizer(model_dir: Path):
    return load_tokenizer(model_dir / "tokenizer")


def _reference(model_dir: Path, items: list[dict], keep: str) -> list[dict[str, np.ndarray]]:
    """`pack_multiple_choice` (the SavedModel's packing) of each item, padded to SEQ.

    One batched call (options padded with absent ""), then cut per item.
    """
    width = max(len(item["options"]) for item in items)
    packed = pack_multiple_choice(
        _tokenizer(model_dir),
        tf.constant([item["context"] for item in items]),
        tf.constant([item["question"] for item in items]),
        tf.constant([item["options"] + [""] * (width - len(item["options"])) for item in items]),
        max_seq_length=SEQ,
        max_qa_length=QA,
        context_keep=keep,
    )
    arrays = {}
    for key in ("token_ids", "segment_ids", "padding_mask"):
        value = packed[key].numpy()
        arrays[key] = np.pad(value, [(0, 0), (0, 0), (0, SEQ - value.shape[-1])])
    return [
        {key: value[row : row + 1, : len(item["options"])] for key, value in arrays.items()}
        for row, item in enumerate(items)
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("keep", ["start", "end"])
def test_packed_ids_equal_pack_multiple_choice(exported, mc_models, lang, keep):
    runner = exported[lang, keep, "float32"]
    truncated = 0
    items = _real_items(lang)
    if keep == "end":  # the long items and the first real ones, for time
        items = items[:15] + items[-3:]
    for item, want in zip(items, _reference(mc_models[lang]["model"], items, keep), strict=True):
        got = runner.tokenize(item["context"], item["question"], item["options"])
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"{key} of {item}")
        truncated += int(want["padding_mask"].sum(-1).max() == SEQ)
    assert truncated >= 2, "the items should include contexts cut to max_seq_length"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_probabilities_equal_keras_and_int8_mostly_agrees(exported, mc_models, lang):
    model = albert_tf.load_task_model(mc_models[lang]["model"], "multiple_choice")
    items = _real_items(lang)[:20]
    agree = 0
    for item, inputs in zip(
        items, _reference(mc_models[lang]["model"], items, "start"), strict=True
    ):
        logits = model(inputs, training=False).numpy()[0]
        got = exported[lang, "start", "float32"].predict(
            item["context"], item["question"], item["options"]
        )
        # Another runtime (LiteRT's kernels) on the same float32 weights: the
        # model's rounding budget on its logits; softmax moves no probability by
        # more than half the largest logit change.
        atol = albert_budget(model.config, SEQ) * np.abs(logits).max() / 2
        np.testing.assert_allclose(got, tf.nn.softmax(logits).numpy(), rtol=0, atol=atol)
        if lang == "en":
            int8 = exported[lang, "start", "int8"].predict(
                item["context"], item["question"], item["options"]
            )
            np.testing.assert_allclose(int8.sum(), 1.0, atol=1e-5)
            agree += int(int8.argmax() == got.argmax())
    if lang == "en":
        assert agree >= 0.8 * len(items), f"int8 agrees with float32 on {agree}/{len(items)}"
    assert np.ptp(got) > 1e-2  # the tiny model's options really score differently


def test_no_flex_ops_and_int8_is_smaller(exported):
    for runner in exported.values():
        ops = custom_op_names(runner.path)
        assert not [op for op in ops if op.startswith("Flex")]
        assert set(ops) <= TF_TEXT_OPS, ops
    sizes = {p: Path(exported["en", "start", p].path).stat().st_size for p in ("float32", "int8")}
    assert sizes["int8"] < sizes["float32"]


def test_absent_options_and_limits(exported):
    runner = exported["en", "start", "float32"]
    probs = runner.predict("It rains.", "Take an _ with you.", ["umbrella", "", "hat"])
    assert probs.shape == (3,) and probs[1] == 0.0
    np.testing.assert_allclose(probs.sum(), 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="at most 5"):
        runner.predict("c", "q", ["a"] * 6)
    with pytest.raises(ValueError, match="non-empty option"):
        runner.predict("c", "q", ["", ""])
