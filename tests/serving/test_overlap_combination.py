"""The overlap a multiple-choice export adds to its model's score: the in-graph
count against a plain Python one written here, the fitted weights against the ones
that generated the answers, and a combined export served by a fresh process."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.baselines.combination import fit_combination
from albert_tf.baselines.overlap_in_graph import OverlapScorer

# The units as the baseline defines them, written with Python's Unicode regex
# (not RE2's classes the graph uses).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_UNITS = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")


def python_overlap(context: str, option: str, documents: int, frequency: dict) -> float:
    ctx = Counter(u.lower() for u in _UNITS.findall(context))
    opt = Counter(u.lower() for u in _UNITS.findall(option))
    total = sum(
        min(n, ctx[u]) * (math.log((documents + 1) / (frequency.get(u, 0) + 1)) + 1)
        for u, n in opt.items()
    )
    return total / (math.sqrt(sum(opt.values())) + 1)


TEXTS = [
    ("算法组的成员们精通各种AI算法.", "他们主要负责AI算法的研究和落地."),
    ("今天下雨了。我们应该带什么？", "雨伞和雨衣"),
    ("The cat sat on the mat; the_cat's MAT!", "the mat, the mat and the cat"),
    ("Mixed Ελληνικά, русский, 中文 and emoji 😀", "русский 中文 😀 Ελληνικά"),
    ("", "nothing shared"),
    ("数字 1998 年 and ９９ full-width", "1998年的数字"),
    ("x", ""),
    ("İstanbul・カタカナ and ΣΟΦΊΑ", "istanbul İstanbul・ σοφία カ"),  # case folding, kana marks
]
FREQUENCY = {"算": 3, "法": 1, "ai": 5, "the": 9, "mat": 2, "雨": 4, "1998": 0, "中": 9}


def test_in_graph_overlap_matches_python_on_mixed_scripts():
    scorer = OverlapScorer(9, FREQUENCY)
    contexts = [c for c, _ in TEXTS]
    options = [[o, c, ""] for c, o in TEXTS]  # the context itself as an option, and absent
    got = scorer(tf.constant(contexts), tf.constant(options)).numpy()
    expected = [
        [python_overlap(c, o, 9, FREQUENCY) for o in row]
        for c, row in zip(contexts, options, strict=True)
    ]
    # float32 sums of at most ~20 terms of size ≤ ln(10)+1: rounding below 1e-5 relative.
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert got[0, 0] > 0 and got[4, 0] == 0 and (got[:, 2] == 0).all()


def test_overlap_scorer_refuses_frequencies_above_the_documents():
    with pytest.raises(ValueError, match=r"lie in \[0, 2\]"):
        OverlapScorer(2, {"a": 3})


def test_fit_recovers_the_weights_that_generated_the_answers():
    # Answers drawn from softmax(0.8·logit + 2·overlap): the maximum-likelihood fit
    # is consistent, and with 20,000 items its standard error is about 0.02 here.
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, (20_000, 4))
    overlap = rng.uniform(0, 1.5, (20_000, 4))
    scores = 0.8 * logits + 2.0 * overlap
    p = np.exp(scores - scores.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    labels = (p.cumsum(1) > rng.uniform(size=(20_000, 1))).argmax(1)
    weights = fit_combination(logits, overlap, labels)
    assert weights["model_weight"] == pytest.approx(0.8, abs=0.06)
    assert weights["overlap_weight"] == pytest.approx(2.0, abs=0.15)


def test_fit_refuses_a_label_on_an_absent_option():
    with pytest.raises(ValueError, match="absent option"):
        fit_combination(np.zeros((1, 2)), np.zeros((1, 2)), np.array([1]), [[True, False]])


_SERVE = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
request = json.load(open(sys.argv[1]))
loaded = tf.saved_model.load(sys.argv[2])
out = loaded.signatures["serving_default"](
    **{k: tf.constant(v) for k, v in request.items()})
ids = loaded.signatures["tokenize"](**{k: tf.constant(v) for k, v in request.items()})
by_ids = loaded.signatures["score_ids"](
    token_ids=ids["token_ids"], segment_ids=ids["segment_ids"], padding_mask=ids["padding_mask"])
empty = loaded.signatures["serving_default"](
    context=tf.zeros([0], tf.string), question=tf.zeros([0], tf.string),
    options=tf.zeros([0, 3], tf.string))
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}
                 | {"ids_logits": by_ids["logits"].numpy().tolist(),
                    "empty": {k: list(v.shape) for k, v in empty.items()}}))
"""


def test_a_combined_export_adds_the_overlap_in_a_fresh_process(mc_models, tmp_path):
    from albert_tf.recipes.demo_models.combine import combine
    from albert_tf.serving import export_saved_model

    model_dir = tmp_path / "model"
    shutil.copytree(mc_models["zh"]["model"], model_dir)
    items = [
        {
            "id": str(i),
            "context": c,
            "question": "",
            "options": [o, "你吃饭了吗?", "雨伞"],
            "label": 0,
        }
        for i, (c, o) in enumerate(TEXTS[:4] * 3)
    ]
    dev = tmp_path / "dev.jsonl"
    dev.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items))
    documents = ["算法的研究", "今天下雨", "the cat", "中文 and русский", "AI 算法"]
    record = combine(str(model_dir), str(dev), documents)
    assert record["documents"] == 5 and record["fitted_on"]["items"] == 12
    assert record["overlap_weight"] > 0  # the right option always shares the most
    saved = export_saved_model(model_dir, tmp_path / "exported" / "mc", version=1)
    meta = json.loads((tmp_path / "exported/mc/1/assets.extra/albert_tf.json").read_text())
    assert meta["overlap_combination"]["model_weight"] == record["model_weight"]

    request = {
        "context": [TEXTS[0][0], TEXTS[1][0]],
        "question": ["", "带什么？"],
        "options": [[TEXTS[0][1], "你吃饭了吗?", ""], ["雨伞", "冰淇淋", "AI"]],
    }
    (tmp_path / "request.json").write_text(json.dumps(request, ensure_ascii=False))
    (tmp_path / "serve.py").write_text(_SERVE)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "serve.py"), str(tmp_path / "request.json"), saved],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer.pop("empty") == {  # an empty batch: empty answers of every output
        "probabilities": [0, 3], "logits": [0, 3], "prediction": [0],
        "model_logits": [0, 3], "overlap": [0, 3],
    }  # fmt: skip
    out = {k: np.array(v) for k, v in answer.items()}
    frequency = json.loads((model_dir / "finetune.json").read_text())["overlap_combination"][
        "document_frequency"
    ]
    # The documents holding each unit, counted here with Python's regex.
    expected_frequency = Counter(
        u for d in documents for u in {x.lower() for x in _UNITS.findall(d)}
    )
    assert frequency == dict(expected_frequency)
    expected_overlap = [
        [python_overlap(f"{c} {q}", o, 5, frequency) if o else 0.0 for o in row]
        for c, q, row in zip(
            request["context"], request["question"], request["options"], strict=True
        )
    ]
    np.testing.assert_allclose(out["overlap"], expected_overlap, rtol=1e-5, atol=1e-6)
    present = np.array([[True, True, False], [True, True, True]])
    combined = (
        record["model_weight"] * out["model_logits"] + record["overlap_weight"] * out["overlap"]
    )
    np.testing.assert_allclose(out["logits"][present], combined[present], rtol=1e-5, atol=1e-5)
    assert out["probabilities"][0, 2] == 0 and out["logits"][0, 2] < -1e8
    np.testing.assert_allclose(out["probabilities"].sum(1), 1, rtol=1e-6)
    assert (out["prediction"] == np.where(present, out["logits"], -np.inf).argmax(1)).all()
    # score_ids has no text: the model alone.
    np.testing.assert_allclose(out["ids_logits"], out["model_logits"], rtol=1e-5, atol=1e-5)
