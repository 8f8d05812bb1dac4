"""Named-entity tagging for the ``finetune`` command: items, tags, model and trainer."""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

from albert_tf.checkpoints.saved_format import load_task_model, read_finetune_settings
from albert_tf.tasks.tagging import SPEC
from albert_tf.tasks.task import FineTuningTask, TaskData
from albert_tf.training.finetuning.options import FineTuningOptions


class TaggingTask(FineTuningTask):
    spec = SPEC

    def read(
        self, options: FineTuningOptions, report: Callable[[str, list, Any], None]
    ) -> TaskData:
        from albert_tf.tasks.tagging.data import check_tag_names, read_tagging, tag_names
        from albert_tf.tasks.tagging.preprocessing import check_stride

        check_stride(options.settings.tagging_stride, options.max_seq_length)  # before reading
        train, skipped = read_tagging(options.train_files)
        if not any(item.labelled for item in train):
            raise ValueError(
                "no training sentence is annotated (a file without entity annotations is read "
                "as unlabelled text); give --train_files with entities"
            )
        train = [item for item in train if item.labelled]
        # Continuing a tagger: its tags decide the head's outputs.
        previous = read_finetune_settings(options.checkpoint) if options.checkpoint else {}
        names = previous.get("label_names") if previous.get("task") == SPEC.name else None
        if names:
            check_tag_names(names)
        else:
            names = tag_names(e.label for item in train for e in item.entities)
            if len(names) < 3:
                raise ValueError(
                    "the training data has no entities: a tagger needs at least one "
                    "annotated entity (check the files' entity fields)"
                )
        parts: dict[str, list | None] = {"dev": None, "test": None}
        for name, files in (("dev", options.dev_files), ("test", options.test_files)):
            if files:
                items, part_skipped = read_tagging(files)
                if not all(item.labelled for item in items):
                    raise ValueError(
                        f"--{name}_files has texts without entity annotations: scoring them "
                        "would count every entity as missed; give annotated files"
                    )
                report(name, items, part_skipped, names)
                parts[name] = items
        settings, head = options.settings, {}
        if settings.tagger_lstm_units is not None:
            head["lstm_units"] = settings.tagger_lstm_units
        if settings.tagger_crf is not None:
            head["crf"] = settings.tagger_crf
        return TaskData(train, parts["dev"], parts["test"], skipped, names, head_options=head)

    def describe(self, name: str, items: list, skipped, label_names=None) -> list[str]:
        counts = collections.Counter(e.label for item in items for e in item.entities)
        lines = [f"{name}: {len(items)} texts; entities {dict(sorted(counts.items()))}"]
        if skipped:
            lines.append(f"{name}: skipped {sum(skipped.values())} bad input(s): {dict(skipped)}")
        return lines

    def head_arguments(self, data: TaskData) -> dict[str, Any]:
        return {"num_tags": len(data.label_names or [])} | data.head_options

    def load_model(self, directory: str | os.PathLike[str], dtype, data: TaskData | None = None):
        fresh = self.head_arguments(data) if data is not None else None
        return load_task_model(directory, self.spec, dtype=dtype, head_arguments=fresh)

    def trainer(self, model, tokenizer, data: TaskData, options: FineTuningOptions, **common):
        rate = options.settings.tagger_crf_learning_rate
        if rate is not None:
            if not model.crf:
                raise ValueError(
                    "--tagger_crf_learning_rate is the rate of a CRF head's scores, and this "
                    "tagger has no CRF: add --tagger_crf (a fresh head) or drop the flag"
                )
            # A factor on the schedule: the CRF warms up and decays with the rest.
            common["learning_rate_multipliers"] = {"crf/": rate / common["learning_rate"]}
        return self.spec.load("trainer")(
            model,
            tokenizer,
            tag_names=data.label_names,
            stride=options.settings.tagging_stride,
            pack_chars=options.settings.tagging_pack_chars,
            word_aggregation=options.settings.word_aggregation,
            **common,
        )

    def extra_scores(self, best, test: list, train: list, log: Callable[[str], None]) -> dict:
        """The gazetteer baseline on the same test sentences: every training entity
        string, found by longest match."""
        from albert_tf.baselines.gazetteer import Gazetteer
        from albert_tf.training.finetuning.metrics import entity_scores

        gazetteer = Gazetteer.from_examples(train)
        scores = entity_scores([x.entities for x in test], [gazetteer.find(x.text) for x in test])
        log(f"test: a gazetteer of the training entities scores F1 {scores['f1']:.4f}")
        return {"test_gazetteer": scores}

    def model_card(self, options: FineTuningOptions, data: TaskData, summary: dict) -> dict | None:
        """What the app shows about an exported tagger, from this run."""
        types = sorted({name[2:] for name in data.label_names or [] if name != "O"})
        start = options.checkpoint or f"random weights ({options.init_config})"
        card = {
            "name": os.path.basename(os.path.normpath(options.export_dir or "")),
            "task": f"named entities: {', '.join(types)}",
            "trained_on": ", ".join(options.train_files),
            "finetuning": (
                f"{len(data.train):,} texts, {summary['steps']:,} steps from {start}, "
                f"{summary['train_seconds'] / 60:.0f} min"
            ),
        }
        if data.test and "test" in summary:
            test = summary["test"]
            held = {k: test[k] for k in ("precision", "recall", "f1")}
            held["texts"] = test["count"]
            if "test_gazetteer" in summary:
                held["gazetteer_f1"] = summary["test_gazetteer"]["f1"]
            card["held_out"] = held
        return card
