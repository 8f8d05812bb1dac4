"""The classification baselines on the shared review set: accuracy, time, RSS.

The set a fine-tuned ALBERT is compared with (docs/finetuning.md):
``../shared/data/classification/zh_product_reviews.jsonl.gz`` (JSON Lines with
``id``, ``text`` and a 0/1 ``label``), split as fine-tuning splits it,
``split_examples(items, [0.8, 0.1, 0.1], seed=0, group=item_group)`` into train/dev/test
(the copies of one review in one part). Each
kind of units (``units``: characters and words, `text_units`; ``bigrams``: and
pairs of adjacent ones, `units_and_bigrams`) is fitted in a fresh process by
`albert_tf.baselines.bag_of_units.fit_bag_of_units` (L2 chosen on dev)
and scored on test, and also on the test items whose text no training item
has (with the split by group, all of them; a split by id put copies of training
reviews in test). Writes ``experiments/results/classification_baseline.json`` and prints a
table::

    python -m experiments.classification_baseline                    # all three, ~1 min on 2 cores
    python -m experiments.classification_baseline --variants=units   # characters and words only
    python -m experiments.classification_baseline --smoke            # 2,000 reviews, /tmp
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import time
from typing import Any

import experiments
from bench import common
from bench.common import SHARED_DATA, Job, Steps

DATA = os.path.join(SHARED_DATA, "classification", "zh_product_reviews.jsonl.gz")
UNITS = ("units", "bigrams", "naive_bayes")
SMOKE_ITEMS = 2000


@dataclasses.dataclass(frozen=True)
class Item:
    id: str
    text: str
    text_pair: str
    label: int

    @property
    def group(self) -> str:
        """The split's group, as `ClassificationExample.group` has it: a text's copies."""
        return f"text:{self.text}\x00{self.text_pair}"


def load(path: str, max_items: int = 0) -> list[Item]:
    items = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            items.append(Item(str(row["id"]), row["text"], row.get("text_pair", ""), row["label"]))
            if max_items and len(items) >= max_items:
                break
    return items


def rss_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak since the last reset) of this process, in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    raise KeyError(field)


def reset_peak_rss() -> bool:
    """Restarts ``VmHWM`` from the current RSS, so it measures what comes next."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def run_worker(args: argparse.Namespace, units_name: str) -> dict[str, Any]:
    import numpy as np

    from albert_tf.baselines import bag_of_units as baseline
    from albert_tf.data.splits import item_group, split_examples

    units = {
        "units": baseline.text_units,
        "bigrams": baseline.units_and_bigrams,
        "naive_bayes": baseline.units_and_bigrams,
    }[units_name]
    items = load(args.data, SMOKE_ITEMS if args.smoke else 0)
    if args.distinct_texts:  # as finetune --distinct_texts reads them
        from albert_tf.tasks.classification.task import distinct_texts

        items, _ = distinct_texts(items)
    # As finetune --split splits: the copies of one text stay in one part.
    train, dev, test = split_examples(items, [0.8, 0.1, 0.1], seed=0, group=item_group)
    train_texts = {item.text for item in train}
    unseen = [item for item in test if item.text not in train_texts]
    num_labels = max(item.label for item in items) + 1

    rss_before = rss_mb("VmRSS")  # TensorFlow (split_examples' module) and the data
    peak_reset = reset_peak_rss()
    start, cpu_start = time.perf_counter(), time.process_time()
    if units_name == "naive_bayes":
        from albert_tf.baselines.naive_bayes import fit_naive_bayes

        model = fit_naive_bayes(train, num_labels=num_labels, units=units)
    else:
        model = baseline.fit_bag_of_units(train, num_labels=num_labels, dev=dev, units=units)
    fit_s, fit_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start

    def scores(part: list[Item]) -> dict[str, float]:
        labels = np.array([item.label for item in part])
        return baseline.classification_scores(labels, model.predict(part), num_labels)

    start = time.perf_counter()
    test_scores = scores(test)
    predict_s = time.perf_counter() - start
    return {
        "units": units_name,
        "items": {"train": len(train), "dev": len(dev), "test": len(test)},
        "distinct_texts": len({item.text for item in items}),
        "test_texts_in_train": len(test) - len(unseen),
        "l2": getattr(model, "l2", None),  # naive Bayes has none
        "features": len(model.vocabulary),
        "dev": scores(dev),
        "test": test_scores,
        "test_unseen_texts": scores(unseen) if unseen else None,
        "fit_s": round(fit_s, 1),
        # CPU seconds too: on a shared machine the wall time depends on the others' load.
        "fit_cpu_s": round(fit_cpu_s, 1),
        "predict_test_s": round(predict_s, 2),
        "rss_before_fit_mb": rss_before,
        "fit_peak_rss_mb": rss_mb("VmHWM") if peak_reset else None,
        "fit_extra_rss_mb": round(rss_mb("VmHWM") - rss_before, 1) if peak_reset else None,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| units | features | L2 | test accuracy | macro-F1 | unseen-text accuracy (n) "
        "| fit s (CPU s) | RSS MB: fit's peak − before / process peak |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["results"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} |")
            continue
        t, u = r["test"], r["test_unseen_texts"] or {}
        unseen = f"{u['accuracy']:.3f} ± {u['accuracy_stderr']:.3f} ({u['count']})" if u else "—"
        lines.append(
            f"| {name} | {r['features']:,} | {'—' if r['l2'] is None else format(r['l2'], 'g')} "
            f"| {t['accuracy']:.3f} ± {t['accuracy_stderr']:.3f} | {t['macro_f1']:.3f} "
            f"| {unseen} | {r['fit_s']} ({r['fit_cpu_s']}) "
            f"| {r['fit_extra_rss_mb']} / {r['peak_rss_mb']} |"
        )
    first = next((r for r in report["results"].values() if "error" not in r), None)
    if first:
        lines.append(
            f"\n{first['items']['test']} test items, {first['test_texts_in_train']} of them "
            f"with a text some training item has ({first['distinct_texts']:,} distinct texts "
            f"in {sum(first['items'].values()):,} items). The fit's RSS: its peak less "
            "the RSS before it (TensorFlow and the data loaded); the process: its peak."
        )
    return "\n".join(lines)


class ClassificationBaseline(common.Benchmark):
    name = "classification_baseline"
    what = (
        "bag-of-units logistic regression (albert_tf.baselines.bag_of_units), "
        "binary features, L2 chosen on dev, full-batch Adam in numpy; and multinomial "
        "naive Bayes on characters, words and their bigrams (albert_tf.baselines.naive_bayes)"
    )
    variants = UNITS  # each fitted in a fresh process
    results_dir = experiments.RESULTS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data", default=DATA, help="JSON Lines (.gz): id, text, label")
        parser.add_argument(
            "--distinct_texts",
            action="store_true",
            help="one review of each text, the smallest id's (finetune --distinct_texts)",
        )

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "data": os.path.relpath(args.data),
            "distinct_texts": args.distinct_texts,
            "split": "split_examples(items, [0.8, 0.1, 0.1], seed=0, group=item_group)",
            "results": {},
        }

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for name in args.variants:
            report["results"][name] = yield Job(name)

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        return run_worker(args, job.variant)

    def table(self, report: dict[str, Any]) -> str:
        return markdown(report)


if __name__ == "__main__":
    common.main(ClassificationBaseline())
