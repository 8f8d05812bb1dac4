"""Multiple choice for the ``finetune`` command: items, model and trainer."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any

from albert_tf.tasks.multiple_choice import SPEC
from albert_tf.tasks.task import FineTuningTask, TaskData
from albert_tf.training.finetuning.options import FineTuningOptions


def load_items(specs: Sequence[str], seed: int) -> tuple[list, collections.Counter]:
    """Items and skip counts from paths, or a next-sentence task for ``sample:<lang>``."""
    from albert_tf.data import read_documents, sample_language, sample_path
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice
    from albert_tf.tasks.multiple_choice.next_sentence import next_sentence_items

    items: list = []
    skipped: collections.Counter = collections.Counter()
    files = []
    for spec in specs:
        lang = sample_language(spec)
        if lang is not None:
            docs = list(read_documents(sample_path(lang)))
            items += next_sentence_items(docs, seed=seed, lang=lang, prefix=f"sample_{lang}")
        else:
            files.append(spec)
    if files:
        more, skipped = read_multiple_choice(files)
        items += more
    return items, skipped


class MultipleChoiceTask(FineTuningTask):
    spec = SPEC

    def read(
        self, options: FineTuningOptions, report: Callable[[str, list, Any], None]
    ) -> TaskData:
        train, skipped = load_items(options.train_files, options.split_seed)
        # An item without a label (a file to answer, read for `predict`) cannot train.
        skipped["missing_label"] += sum(item.label < 0 for item in train)
        train = [item for item in train if item.label >= 0]
        skipped += collections.Counter()  # drops a zero count
        parts: dict[str, list | None] = {"dev": None, "test": None}
        for name, files in (("dev", options.dev_files), ("test", options.test_files)):
            if files:
                items, part_skipped = load_items(files, options.split_seed)
                if any(item.label < 0 for item in items):
                    raise ValueError(
                        f"--{name}_files has items without a label: scoring them would count "
                        "every answer as wrong; give files with labels (python -m "
                        "albert_tf.predict answers unlabelled items)"
                    )
                report(name, items, part_skipped)
                parts[name] = items
        return TaskData(train, parts["dev"], parts["test"], skipped)

    def describe(self, name: str, items: list, skipped, label_names=None) -> list[str]:
        counts = collections.Counter(len(item.options) for item in items)
        lines = [f"{name}: {len(items)} items; options per item {dict(sorted(counts.items()))}"]
        if skipped:
            lines.append(f"{name}: skipped {sum(skipped.values())} bad input(s): {dict(skipped)}")
        return lines

    def trainer(self, model, tokenizer, data: TaskData, options: FineTuningOptions, **common):
        return self.spec.load("trainer")(
            model,
            tokenizer,
            max_qa_length=options.settings.max_qa_length,
            context_keep=options.settings.context_keep,
            **common,
        )
