"""Scores of a text classifier: accuracy, macro-F1, MCC; Pearson and Spearman for scores;
entity-level precision, recall and F1 for a tagger.

The metrics GLUE and CLUE report, in numpy: accuracy (with its binomial standard
error, `albert_tf.training.evaluation.binomial_stderr`) and macro-F1 for classes,
Matthews correlation for CoLA-style sets, Pearson and Spearman correlation for
STS-B-style scores; for named entities, seqeval's (conlleval's) exact-match
scores, `entity_scores`; for extractive QA, SQuAD's exact match and F1, `squad_scores`,
and for Chinese QA CMRC 2018's character-level ones, `cmrc_scores`.

>>> import numpy as np
>>> labels, predictions = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 1, 2])
>>> round(accuracy(labels, predictions), 2), round(macro_f1(labels, predictions, 3), 4)
(0.8, 0.8222)
>>> round(pearson([1, 2, 3, 4], [1, 2, 3, 5]), 4), spearman([1, 2, 3, 4], [1, 2, 3, 5])
(0.9827, 1.0)
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from albert_tf.data.chinese_wwm import is_cjk_char
from albert_tf.training.evaluation import binomial_stderr

#: Dev metrics that can pick the best checkpoint, by kind of head.
CLASS_METRICS = ("accuracy", "macro_f1", "mcc")
SCORE_METRICS = ("pearson", "spearman")


def accuracy(labels: Sequence[int], predictions: Sequence[int]) -> float:
    return float(np.mean(np.asarray(labels) == np.asarray(predictions)))


def confusion_matrix(labels: Sequence[int], predictions: Sequence[int], num_labels: int):
    """[true, predicted] counts."""
    matrix = np.zeros((num_labels, num_labels), np.int64)
    np.add.at(matrix, (np.asarray(labels, np.int64), np.asarray(predictions, np.int64)), 1)
    return matrix


def macro_f1(labels: Sequence[int], predictions: Sequence[int], num_labels: int) -> float:
    """Mean F1 over the classes that occur among the labels or the predictions.

    scikit-learn's ``f1_score(average="macro")``: a class a test set neither holds nor
    is predicted does not pull the mean down, so scores of subsets stay comparable.
    """
    matrix = confusion_matrix(labels, predictions, num_labels)
    true_positive = np.diag(matrix).astype(float)
    denominator = matrix.sum(0) + matrix.sum(1)  # predicted + actual, = 2TP + FP + FN
    present = denominator > 0
    if not present.any():
        return 0.0  # no items
    return float(np.mean(2 * true_positive[present] / denominator[present]))


def mcc(labels: Sequence[int], predictions: Sequence[int], num_labels: int) -> float:
    """Matthews correlation (its multi-class form, Gorodkin's R_K); 0 when undefined."""
    matrix = confusion_matrix(labels, predictions, num_labels).astype(float)
    n = matrix.sum()
    correct = np.trace(matrix)
    predicted, actual = matrix.sum(0), matrix.sum(1)
    numerator = correct * n - predicted @ actual
    denominator = np.sqrt(n**2 - predicted @ predicted) * np.sqrt(n**2 - actual @ actual)
    return float(numerator / denominator) if denominator > 0 else 0.0


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else 0.0


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank (as Spearman's rho needs)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    unique, inverse = np.unique(values, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks, minlength=len(unique))
    counts = np.bincount(inverse, minlength=len(unique))
    return (sums / counts)[inverse]


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return pearson(_ranks(np.asarray(x, np.float64)), _ranks(np.asarray(y, np.float64)))


def class_metrics(labels, predictions, num_labels: int) -> dict[str, float]:
    value = accuracy(labels, predictions)
    return {
        "accuracy": value,
        "accuracy_stderr": binomial_stderr(value, len(labels)),
        "macro_f1": macro_f1(labels, predictions, num_labels),
        "mcc": mcc(labels, predictions, num_labels),
    }


def score_metrics(labels, scores) -> dict[str, float]:
    labels, scores = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    return {
        "pearson": pearson(labels, scores),
        "spearman": spearman(labels, scores),
        "mse": float(np.mean((labels - scores) ** 2)),
    }


def _precision_recall_f1(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    total = precision + recall
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / total if total else 0.0,
    }


def _entity_key(entity: Any) -> tuple:
    """An `Entity`-like object (``start``, ``end``, ``label``) or a tuple, as a tuple."""
    if hasattr(entity, "label"):
        return (entity.start, entity.end, entity.label)
    return tuple(entity)


def entity_scores(
    gold: Sequence[Iterable[tuple]], predicted: Sequence[Iterable[tuple]]
) -> dict[str, Any]:
    """Exact-match entity scores, micro-averaged, and per label (seqeval's defaults).

    Args:
        gold, predicted: per sentence, its entities as ``(start, end, label)``
            tuples (the label last; any span convention, the same on both sides)
            or `albert_tf.tasks.tagging.data.Entity` objects. Each sentence's
            entities are a set: a repeat counts once. An entity is correct if the
            same sentence's other side holds it exactly, span and label.

    Returns:
        ``precision``, ``recall``, ``f1`` (micro: over all entities), the counts
        ``gold``, ``predicted``, ``correct``, and ``per_label``: for each label in
        either side, sorted, ``{"precision", "recall", "f1", "support"}`` (support:
        its gold entities). As seqeval's default ``zero_division="warn"`` (without
        the warning): precision is 0 with nothing predicted, recall 0 with no gold
        entity, F1 ``2PR / (P + R)`` and 0 when ``P + R`` is 0, so two empty sides
        score 0, not 1.

    Raises:
        ValueError: ``gold`` and ``predicted`` hold different numbers of sentences.

    >>> gold = [[(0, 2, "PER"), (5, 7, "LOC")], [(1, 3, "ORG")]]
    >>> predicted = [[(0, 2, "PER"), (5, 8, "LOC")], []]
    >>> scores = entity_scores(gold, predicted)
    >>> [round(scores[k], 4) for k in ("precision", "recall", "f1")], scores["correct"]
    ([0.5, 0.3333, 0.4], 1)
    >>> scores["per_label"]["ORG"]
    {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'support': 1}
    """
    if len(gold) != len(predicted):
        raise ValueError(
            f"entity_scores needs one entity list per sentence on both sides, got "
            f"{len(gold)} gold and {len(predicted)} predicted sentences"
        )
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for gold_entities, predicted_entities in zip(gold, predicted, strict=True):
        gold_set = {_entity_key(e) for e in gold_entities}
        predicted_set = {_entity_key(e) for e in predicted_entities}
        for side, entities in (("gold", gold_set), ("predicted", predicted_set)):
            for entity in entities:
                counts[entity[-1]][side] += 1
        for entity in gold_set & predicted_set:
            counts[entity[-1]]["correct"] += 1
    total = {key: sum(c[key] for c in counts.values()) for key in ("gold", "predicted", "correct")}
    per_label = {
        label: _precision_recall_f1(c["correct"], c["predicted"], c["gold"])
        | {"support": c["gold"]}
        for label, c in sorted(counts.items())
    }
    return (
        _precision_recall_f1(total["correct"], total["predicted"], total["gold"])
        | total
        | {"per_label": per_label}
    )


# -- extractive question answering ---------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_ASCII_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's official normalisation: lower-case, ASCII punctuation and the
    articles a/an/the removed, whitespace runs made one space.

    >>> normalize_answer("The  Cat's hat!")
    'cats hat'
    """
    text = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """The tokens SQuAD's F1 counts: `normalize_answer`'s words, and (for Chinese,
    CMRC 2018's "mixed segmentation") each CJK character a token of its own, CJK
    punctuation dropped. Text without CJK characters is split exactly as SQuAD splits it.

    >>> answer_tokens("an ALBERT model"), answer_tokens("在北京，2008年")
    (['albert', 'model'], ['在', '北', '京', '2008', '年'])
    """
    tokens: list[str] = []
    for word in normalize_answer(text).split():
        if not any(map(is_cjk_char, word)):
            tokens.append(word)
            continue
        run = ""
        for ch in word:
            if is_cjk_char(ch) or unicodedata.category(ch).startswith("P"):
                if run:
                    tokens.append(run)
                    run = ""
                if not unicodedata.category(ch).startswith("P"):
                    tokens.append(ch)
            else:
                run += ch
        if run:
            tokens.append(run)
    return tokens


def _answer_f1(gold: str, predicted: str) -> float:
    gold_tokens, predicted_tokens = answer_tokens(gold), answer_tokens(predicted)
    if not gold_tokens or not predicted_tokens:
        return float(gold_tokens == predicted_tokens)  # no answer: right only if both empty
    common = sum(
        (collections.Counter(gold_tokens) & collections.Counter(predicted_tokens)).values()
    )
    if not common:
        return 0.0
    precision, recall = common / len(predicted_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def answer_scores(golds: Sequence[str], predicted: str) -> tuple[float, float]:
    """``(exact match, F1)`` of one prediction, the best over its gold answers; the
    answers that normalise to nothing are left out, and none left means "no answer"
    (SQuAD 2.0's script: then only an empty prediction is right)."""
    kept = [g for g in golds if normalize_answer(g)] or [""]
    exact = max(float(answer_tokens(g) == answer_tokens(predicted)) for g in kept)
    return exact, max(_answer_f1(g, predicted) for g in kept)


def squad_scores(golds: Sequence[Sequence[str]], predictions: Sequence[str]) -> dict[str, Any]:
    """SQuAD's ``exact_match`` and ``f1`` (means over questions, 0 to 1; the official
    script prints them ×100), with ``has_answer_*`` and ``no_answer_*`` means when
    both kinds of question occur, and ``count``.

    Args:
        golds: per question, its gold answer texts (``[""]`` or ``[]``: none).
        predictions: per question, the predicted text ("" for no answer).

    >>> scores = squad_scores([["Denver Broncos"], ["blue", "Blue!"], [""]],
    ...                       ["the Denver Broncos", "red", ""])
    >>> round(scores["exact_match"], 4), round(scores["f1"], 4)
    (0.6667, 0.6667)
    """
    if len(golds) != len(predictions):
        raise ValueError(
            f"squad_scores needs one prediction per question, got {len(golds)} questions "
            f"and {len(predictions)} predictions"
        )
    if not golds:
        raise ValueError("squad_scores needs at least one question")
    scored = [answer_scores(g, p) for g, p in zip(golds, predictions, strict=True)]
    exact = np.array([s[0] for s in scored])
    f1 = np.array([s[1] for s in scored])
    has = np.array([any(normalize_answer(g) for g in gold) for gold in golds])
    out: dict[str, Any] = {
        "exact_match": float(exact.mean()),
        "f1": float(f1.mean()),
        "count": len(golds),
    }
    if has.any() and not has.all():
        for name, part in (("has_answer", has), ("no_answer", ~has)):
            out[f"{name}_exact_match"] = float(exact[part].mean())
            out[f"{name}_f1"] = float(f1[part].mean())
            out[f"{name}_count"] = int(part.sum())
    return out


# -- CMRC 2018 (Chinese extractive QA) ----------------------------------------------

#: The characters CMRC 2018's official ``cmrc2018_evaluate.py`` drops (its ``sp_char``;
#: its "……" entry is two characters, which a character never equals, so "…" stays).
CMRC_PUNCTUATION = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")
#: What the script splits off a non-Chinese run as ``nltk.word_tokenize`` does for the
#: runs CMRC answers hold: numbers and dotted words whole (3.5, 1,000, u.s), the other
#: punctuation one token each (nltk itself is not a dependency).
_CMRC_RUN_TOKEN = re.compile(r"\d+(?:[.,]\d+)+|\w+(?:\.\w+)*|[^\w\s]")


def cmrc_segments(text: str) -> list[str]:
    """CMRC 2018's "mixed segmentation" with its punctuation removed: lower-cased and
    stripped, each character of U+4E00–U+9FA5 a token, the runs between them split into
    words (`_CMRC_RUN_TOKEN`), `CMRC_PUNCTUATION` dropped.

    >>> cmrc_segments("在北京，2008年 Beijing Games")
    ['在', '北', '京', '2008', '年', 'beijing', 'games']
    """
    segments: list[str] = []
    run = ""
    for ch in text.lower().strip():
        if ch in CMRC_PUNCTUATION:
            continue
        if "\u4e00" <= ch <= "\u9fa5":
            segments += _CMRC_RUN_TOKEN.findall(run)
            run = ""
            segments.append(ch)
        else:
            run += ch
    return segments + _CMRC_RUN_TOKEN.findall(run)


def _longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """The length of the longest common contiguous run of ``a`` and ``b`` (the script's
    ``find_lcs``: a substring, not a subsequence)."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def cmrc_answer_scores(golds: Sequence[str], predicted: str) -> tuple[float, float]:
    """``(exact match, F1)`` of one prediction by ``cmrc2018_evaluate.py``, the best over
    its gold answers. Exact match compares the texts lower-cased and stripped with
    `CMRC_PUNCTUATION` removed; F1 takes the longest common run of `cmrc_segments` as
    the overlap. A question whose answers have no text ("no answer", which CMRC 2018
    does not have) scores 1 only for a prediction without any segment, as in SQuAD 2.0.

    >>> cmrc_answer_scores(["北京奥运会"], "北京的奥运会")
    (0.0, 0.5454545454545454)
    """

    def without_punctuation(text: str) -> str:
        return "".join(ch for ch in text.lower().strip() if ch not in CMRC_PUNCTUATION)

    predicted_segments = cmrc_segments(predicted)
    kept = [g for g in golds if cmrc_segments(g)]
    if not kept:
        right = float(not predicted_segments)
        return right, right
    exact = max(float(without_punctuation(g) == without_punctuation(predicted)) for g in kept)
    f1 = 0.0
    for gold in kept:
        gold_segments = cmrc_segments(gold)
        common = _longest_common_run(gold_segments, predicted_segments)
        if common:
            precision = common / len(predicted_segments)
            recall = common / len(gold_segments)
            f1 = max(f1, 2 * precision * recall / (precision + recall))
    return exact, f1


def cmrc_scores(golds: Sequence[Sequence[str]], predictions: Sequence[str]) -> dict[str, Any]:
    """CMRC 2018's ``exact_match`` and ``f1`` (means over questions, 0 to 1; the
    official script prints them ×100) and ``count``; `cmrc_answer_scores` per question.

    >>> cmrc_scores([["1998年"], ["江泽民", "江泽民主席"]], ["1998年。", "江泽民主席"])
    {'exact_match': 1.0, 'f1': 1.0, 'count': 2}
    """
    if len(golds) != len(predictions):
        raise ValueError(
            f"cmrc_scores needs one prediction per question, got {len(golds)} questions "
            f"and {len(predictions)} predictions"
        )
    if not golds:
        raise ValueError("cmrc_scores needs at least one question")
    scored = np.array([cmrc_answer_scores(g, p) for g, p in zip(golds, predictions, strict=True)])
    return {
        "exact_match": float(scored[:, 0].mean()),
        "f1": float(scored[:, 1].mean()),
        "count": len(golds),
    }


def best_no_answer_threshold(
    golds: Sequence[Sequence[str]],
    answers: Sequence[str],
    margins: Sequence[float],
) -> tuple[float, float]:
    """The threshold on "no answer" margins that maximises mean F1, and that F1.

    SQuAD 2.0's ``find_best_thresh``: question ``i`` is answered with
    ``answers[i]`` when ``margins[i]`` (its null score minus its best span's)
    is at most the threshold, else left unanswered. Candidates are the
    margins themselves (and "never answer"); ties keep the lowest.
    """
    has_answer = [any(normalize_answer(g) for g in gold) for gold in golds]
    # As the official script: an answered question without an answer scores 0 for any
    # non-empty text, even one that normalises to nothing.
    f1_answer = np.array(
        [
            answer_scores(g, a)[1] if has else float(a == "")
            for g, a, has in zip(golds, answers, has_answer, strict=True)
        ]
    )
    f1_null = np.array([0.0 if has else 1.0 for has in has_answer])
    margins = np.asarray(margins, np.float64)
    candidates = np.concatenate([[-np.inf], np.sort(margins)])
    best_threshold, best_f1 = -np.inf, -1.0
    for threshold in candidates:
        answered = margins <= threshold
        f1 = float(np.where(answered, f1_answer, f1_null).mean())
        if f1 > best_f1:
            best_threshold, best_f1 = float(threshold), f1
    return best_threshold, best_f1
