"""Text classification for the ``finetune`` command: items, labels, model and trainer."""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

from albert_tf.checkpoints.saved_format import load_task_model, read_finetune_settings
from albert_tf.tasks.classification import SPEC
from albert_tf.tasks.task import FineTuningTask, TaskData
from albert_tf.training.finetuning.options import FineTuningOptions


def unseen_texts(items: list, train: list) -> list:
    """The items whose text (and pair) no training item has."""
    seen = {(item.text, item.text_pair) for item in train}
    return [item for item in items if (item.text, item.text_pair) not in seen]


def distinct_texts(items: list) -> tuple[list, int]:
    """One item of each text (with its pair): the one of the smallest id, as the split
    by group would place it; the items in their order, and how many repeats went.

    >>> from albert_tf.tasks.classification.data import ClassificationExample as E
    >>> kept, dropped = distinct_texts([E("b", "good", label=1), E("a", "good", label=0),
    ...                                 E("c", "bad", label=0)])
    >>> [(item.id, item.label) for item in kept], dropped
    ([('a', 0), ('c', 0)], 1)
    """
    first: dict[str, Any] = {}
    for item in items:
        if item.group not in first or str(item.id) < str(first[item.group].id):
            first[item.group] = item
    kept = {id(item) for item in first.values()}
    return [item for item in items if id(item) in kept], len(items) - len(first)


class ClassificationTask(FineTuningTask):
    spec = SPEC

    def read(
        self, options: FineTuningOptions, report: Callable[[str, list, Any], None]
    ) -> TaskData:
        from albert_tf.tasks.classification.data import read_classification

        # Continuing a classifier: its label map decides the class indexes.
        previous = read_finetune_settings(options.checkpoint) if options.checkpoint else {}
        label_names = previous.get("label_names") or None
        num_labels = options.settings.num_labels
        regression = num_labels == 1
        train, skipped, names = read_classification(
            options.train_files, label_names=label_names, regression=regression
        )
        if options.settings.distinct_texts:
            train, repeats = distinct_texts(train)
            skipped["repeated_text"] += repeats
        if not regression:
            # Caught here, not as a failed step (labels of -1) or a silent regression model.
            if train and not any(item.label >= 0 for item in train):
                raise ValueError(
                    "no training item has a label (a file without any labels is read as "
                    "unlabelled test data); give --train_files with labels"
                )
            if len(names) == 1 and not num_labels and label_names is None:
                raise ValueError(
                    f"the training data has one label, {names[0]!r}: a classifier needs two "
                    "or more (--num_labels=1 trains a regression model on scores)"
                )
        if not regression and num_labels and label_names is None:
            if len(names) > num_labels:
                raise ValueError(
                    f"--num_labels={num_labels} but the training data has "
                    f"{len(names)} labels: {names}"
                )
            names += [f"unused_{i}" for i in range(len(names), num_labels)]
        read = {"label_names": names, "regression": regression}
        parts: dict[str, list | None] = {"dev": None, "test": None}
        for name, files in (("dev", options.dev_files), ("test", options.test_files)):
            if files:
                items, part_skipped, _ = read_classification(files, **read)
                report(name, items, part_skipped, names)
                parts[name] = items
        data = TaskData(train, parts["dev"], parts["test"], skipped, names)
        if not names and self._num_labels(options, data) != 1:
            raise ValueError("no labelled training items (see the counts above)")
        return data

    @staticmethod
    def _num_labels(options: FineTuningOptions, data: TaskData) -> int:
        return 1 if options.settings.num_labels == 1 else len(data.label_names or [])

    def describe(self, name: str, items: list, skipped, label_names=None) -> list[str]:
        counts = collections.Counter(item.label for item in items)
        if label_names:
            per_label = {label_names[k]: v for k, v in sorted(counts.items()) if k >= 0}
            lines = [f"{name}: {len(items)} items; per label {per_label}"]
        else:
            lines = [f"{name}: {len(items)} items (scores)"]
        if skipped:
            lines.append(f"{name}: skipped {sum(skipped.values())} bad input(s): {dict(skipped)}")
        return lines

    def head_arguments(self, data: TaskData) -> dict[str, Any]:
        return {"num_labels": len(data.label_names) if data.label_names else 1}

    def load_model(self, directory: str | os.PathLike[str], dtype, data: TaskData | None = None):
        # A new label set must match a saved head's size (load_task_model says so).
        fresh = self.head_arguments(data) if data is not None else None
        return load_task_model(directory, self.spec, dtype=dtype, head_arguments=fresh)

    def trainer(self, model, tokenizer, data: TaskData, options: FineTuningOptions, **common):
        labels = data.label_names if model.num_labels > 1 else ()
        return self.spec.load("trainer")(
            model, tokenizer, label_names=labels, metric=options.settings.metric, **common
        )

    def extra_scores(self, best, test: list, train: list, log: Callable[[str], None]) -> dict:
        unseen = unseen_texts(test, train)
        if len(unseen) == len(test):
            return {}
        # Copies of a training text measure memory, not classification.
        log(
            f"test: {len(test) - len(unseen)} of {len(test)} items repeat the text of "
            "a training item; 'test_unseen_texts' scores the others alone"
        )
        return {"test_unseen_texts": best.evaluate(unseen)} if unseen else {}

    def model_card(self, options: FineTuningOptions, data: TaskData, summary: dict) -> dict | None:
        """What the app's sidebar shows about an exported classifier, from this run."""
        label_names = data.label_names or []
        num_labels = 1 if options.settings.num_labels == 1 else len(label_names)
        start = options.checkpoint or f"random weights ({options.init_config})"
        card = {
            "name": os.path.basename(os.path.normpath(options.export_dir or "")),
            "task": (
                f"text classification: {', '.join(label_names)}"
                if num_labels > 1
                else "regression: one score per text"
            ),
            "trained_on": ", ".join(options.train_files),
            "finetuning": (
                f"{len(data.train):,} items, {summary['steps']:,} steps from {start}, "
                f"{summary['train_seconds'] / 60:.0f} min"
            ),
        }
        test = data.test
        if test and "test" in summary:
            held = {k: v for k, v in summary["test"].items() if k not in ("loss",)}
            held["items"] = held.pop("count")
            if num_labels > 1:
                counts = collections.Counter(item.label for item in test)
                held["majority"] = max(counts.values()) / len(test)
            if "test_unseen_texts" in summary:
                unseen = summary["test_unseen_texts"]
                key = "accuracy" if num_labels > 1 else "pearson"
                held[f"{key}_on_texts_not_in_training"] = unseen[key]
            card["held_out"] = held
        return card
