"""Extractive question answering for the ``finetune`` command: items, model and trainer."""

from __future__ import annotations

import collections
import os
import re
from collections.abc import Callable
from typing import Any

from albert_tf.checkpoints.saved_format import load_task_model, read_finetune_settings
from albert_tf.tasks.span_qa import SPEC
from albert_tf.tasks.task import FineTuningTask, TaskData
from albert_tf.training.finetuning.options import FineTuningOptions

#: Skip reasons that drop one answer, not the question (`read_span_qa`).
ANSWER_REASONS = ("bad_answer", "answer_text_mismatch")
#: Questions the people-sentence baseline answers: who took part.
WHO = re.compile(r"\bwho\b", re.IGNORECASE)


class SpanQATask(FineTuningTask):
    spec = SPEC

    def __init__(self):
        # The no-answer threshold saved with each model loaded here, by model.
        self._thresholds: dict[int, float | None] = {}

    def read(
        self, options: FineTuningOptions, report: Callable[[str, list, Any], None]
    ) -> TaskData:
        from albert_tf.tasks.span_qa.data import read_span_qa

        train, skipped = read_span_qa(options.train_files)
        unanswered = sum(not item.labelled for item in train)
        if unanswered:  # a file of questions without answers among the training files
            skipped["missing_answers"] += unanswered
        train = [item for item in train if item.labelled]
        if not train:
            raise ValueError(
                'no training question has answers (a file without "answers" is read as '
                "questions to answer); give --train_files with answers"
            )
        parts: dict[str, list | None] = {"dev": None, "test": None}
        for name, files in (("dev", options.dev_files), ("test", options.test_files)):
            if files:
                items, part_skipped = read_span_qa(files)
                if not all(item.labelled for item in items):
                    raise ValueError(
                        f"--{name}_files has questions without answers: scoring them would "
                        "count every answer as wrong; give files with answers"
                    )
                report(name, items, part_skipped)
                parts[name] = items
        return TaskData(train, parts["dev"], parts["test"], skipped)

    def describe(self, name: str, items: list, skipped, label_names=None) -> list[str]:
        contexts = len({item.context for item in items})
        kinds = collections.Counter(
            "impossible" if item.impossible else "answered" for item in items
        )
        lines = [
            f"{name}: {len(items)} questions on {contexts} contexts; {dict(sorted(kinds.items()))}"
        ]
        if skipped:
            dropped = sum(skipped[reason] for reason in ANSWER_REASONS)
            questions = sum(skipped.values()) - dropped
            lines.append(
                f"{name}: skipped {questions} question(s) and dropped {dropped} answer(s) of "
                f"bad input: {dict(skipped)}"
            )
        return lines

    def load_model(self, directory: str | os.PathLike[str], dtype, data: TaskData | None = None):
        model = load_task_model(directory, self.spec, dtype=dtype)
        saved = read_finetune_settings(directory)
        if saved.get("task") == SPEC.name:
            self._thresholds[id(model)] = saved.get("no_answer_threshold")
        return model

    def trainer(self, model, tokenizer, data: TaskData, options: FineTuningOptions, **common):
        return self.spec.load("trainer")(
            model,
            tokenizer,
            max_query_length=options.settings.max_query_length,
            doc_stride=options.settings.doc_stride,
            max_answer_length=options.settings.max_answer_length,
            n_best_size=options.settings.n_best_size,
            no_answer_threshold=self._thresholds.get(id(model)),
            **common,
        )

    def extra_scores(self, best, test: list, train: list, log: Callable[[str], None]) -> dict:
        """For English "who" questions (PICO's "Who were the participants?"): the first
        sentence that names people, on the same test questions. None for other sets."""
        if not all(item.lang == "en" and WHO.search(item.question) for item in test):
            return {}
        from albert_tf.baselines.people_sentence import first_people_sentence
        from albert_tf.training.finetuning.metrics import squad_scores

        golds = [[a.text for a in item.answers] or [""] for item in test]
        answers = [first_people_sentence(item.context)[2] for item in test]
        scores = squad_scores(golds, answers)
        log(
            f"test: the first sentence that names people scores F1 {scores['f1']:.4f} "
            f"(exact match {scores['exact_match']:.4f})"
        )
        return {"test_people_sentence": scores}

    def model_card(self, options: FineTuningOptions, data: TaskData, summary: dict) -> dict | None:
        """What the app shows about an exported QA model, from this run."""
        start = options.checkpoint or f"random weights ({options.init_config})"
        card = {
            "name": os.path.basename(os.path.normpath(options.export_dir or "")),
            "task": "extractive question answering",
            "trained_on": ", ".join(options.train_files),
            "finetuning": (
                f"{len(data.train):,} questions, {summary['steps']:,} steps from {start}, "
                f"{summary['train_seconds'] / 60:.0f} min"
            ),
        }
        if data.test and "test" in summary:
            test = summary["test"]
            held = {
                "exact_match": test["exact_match"],
                "f1": test["f1"],
                "questions": test["count"],
            }
            if "test_people_sentence" in summary:
                held["people_sentence_f1"] = summary["test_people_sentence"]["f1"]
            card["held_out"] = held
        return card
