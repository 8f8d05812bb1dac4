"""Every variant's answers in one form, and how many agree with the reference's.

* span QA: ``[start, end]`` characters of each question's answer in its context;
* tagging: each text's entities, ``[start, end, label]`` sorted;
* classification: each text's label name.
"""

from __future__ import annotations

from typing import Any


def ours_answers(task: str, out: dict[str, Any]) -> list[Any]:
    """The SavedModel's ``serving_default`` outputs (tensors) in the common form."""
    if task == "span_qa":
        return [
            [int(s), int(e)] for s, e in zip(out["start"].numpy(), out["end"].numpy(), strict=True)
        ]
    if task == "tagging":
        starts, ends = out["starts"].numpy(), out["ends"].numpy()
        labels = out["labels"].numpy()
        return [
            sorted(
                [int(s), int(e), label.decode()]
                for s, e, label in zip(row_s, row_e, row_l, strict=True)
                if s >= 0
            )
            for row_s, row_e, row_l in zip(starts, ends, labels, strict=True)
        ]
    return [label.decode() for label in out["label"].numpy()]


def pipeline_answers(task: str, results: Any) -> list[Any]:
    """A Hugging Face pipeline's results for a list of inputs in the common form (a
    pipeline unwraps a one-input answer: a question's dict, a text's entity list)."""
    if task == "span_qa":
        results = [results] if isinstance(results, dict) else results
        return [[int(r["start"]), int(r["end"])] for r in results]
    if task == "tagging":
        if not results or isinstance(results[0], dict):
            results = [results]
        return [
            sorted([int(e["start"]), int(e["end"]), e["entity_group"]] for e in entities)
            for entities in results
        ]
    return [r[0]["label"] if isinstance(r, list) else r["label"] for r in results]


def agreement(answers: list[Any], reference: list[Any]) -> dict[str, Any]:
    """How many of ``answers`` equal ``reference``'s, item by item; for tagging also
    entities found by both."""
    same = sum(a == r for a, r in zip(answers, reference, strict=True))
    report: dict[str, Any] = {"same": same, "of": len(reference)}
    if (
        reference
        and isinstance(reference[0], list)
        and reference[0]
        and isinstance(reference[0][0], list)
    ):
        ours = {(i, tuple(e)) for i, row in enumerate(reference) for e in row}
        theirs = {(i, tuple(e)) for i, row in enumerate(answers) for e in row}
        report["entities"] = {"both": len(ours & theirs), "ours": len(ours), "theirs": len(theirs)}
    return report
