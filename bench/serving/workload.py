"""What the serving benchmark measures: its variants, workloads and work directory.

Shared by the runner (``bench.serving``), the preparation (`bench.serving.prepare`),
our variants (`bench.serving.ours`), the peers (`bench.serving.peers`) and the
report (`bench.serving.report`). Nothing here imports TensorFlow or torch: the
peers' workers must not load TensorFlow.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from typing import Any

from bench.common import MULTIPLE_CHOICE_DATA, time_step
from bench.serving.workdir import PREPARED

# Our SavedModel in each serving precision, with the BERT-base-shaped not-shared
# twin (same FLOPs, 12x the weights: the seed's cache claim) beside it.
SAVEDMODELS = {
    "savedmodel": ("shared", "float32"),
    "savedmodel_bf16": ("shared", "bfloat16"),
    "savedmodel_int8": ("shared", "int8"),
    "not_shared": ("not_shared", "float32"),
    "not_shared_bf16": ("not_shared", "bfloat16"),
    "not_shared_int8": ("not_shared", "int8"),
}
# ONNX Runtime on Hugging Face's model exported to ONNX: as exported ("plain") or
# through onnxruntime.transformers.optimizer (model_type "bert"), each in float32
# and with quantize_dynamic's int8 weights.
ORT = {
    "ort_fp32": "plain",
    "ort_int8": "plain_int8",
    "ort_opt_fp32": "optimized",
    "ort_opt_int8": "optimized_int8",
}
# The optimised int8 model fed in length buckets, as our SavedModel runs large
# requests (albert_tf.serving.length_buckets): like for like.
ORT_BUCKETED = {"ort_opt_int8_buckets": "optimized_int8"}
LITERT = {"litert_fp32": "float32", "litert_int8": "int8"}
VARIANTS = (
    *SAVEDMODELS,
    "savedmodel_score_ids",
    "savedmodel_tokenize",
    "bare_encoder",
    *ORT,
    *ORT_BUCKETED,
    *LITERT,
    "hf",
)
WORKLOADS = {"batch1": 1, "batch32": 32}
NUM_OPTIONS = 4
ITEMS_FILE = os.path.join(MULTIPLE_CHOICE_DATA, "parable_en.jsonl.gz")
#: Files of the work directory (``--workdir``), written by `bench.serving.prepare`
#: (`PREPARED` and `ONNX_INFO` are every serving benchmark's).
WORKLOADS_FILE = "workloads.json"
FIELDS = ("token_ids", "segment_ids", "padding_mask")
#: Our benchmark model in Hugging Face's layout (written by `prepare`).
HF_MODEL = "model_hf"


def build_qa(question: str, option: str) -> str:
    """The packer's question+option rule, for the Hugging Face side (which
    must not import albert_tf/TensorFlow): fill the blank, else append."""
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def typical_items(
    count: int,
    path: str = ITEMS_FILE,
    context_words: tuple[int, int] = (100, 150),
    max_option_words: int = 12,
) -> list[dict[str, Any]]:
    """The first ``count`` items of typical size, each cut to `NUM_OPTIONS` options.

    Typical: a context of ``context_words`` words and options of at most
    ``max_option_words`` words; the answer plus the first short distractors
    are kept, in their original order.
    """
    items = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if not context_words[0] <= len(record["context"].split()) <= context_words[1]:
                continue
            short = [
                i for i, o in enumerate(record["options"]) if len(o.split()) <= max_option_words
            ]
            if record["label"] not in short or len(short) < NUM_OPTIONS:
                continue
            others = [i for i in short if i != record["label"]][: NUM_OPTIONS - 1]
            keep = sorted([record["label"], *others])
            items.append(
                {
                    "id": record["id"],
                    "context": record["context"],
                    "question": record["question"],
                    "options": [record["options"][i] for i in keep],
                    "label": keep.index(record["label"]),
                }
            )
            if len(items) == count:
                return items
    raise ValueError(f"only {len(items)} typical items in {path}, need {count}")


def workload_texts(workdir: str, name: str) -> dict[str, list]:
    with open(os.path.join(workdir, WORKLOADS_FILE), encoding="utf-8") as f:
        return json.load(f)[name]


def workload_ids(workdir: str, name: str) -> dict[str, Any]:
    import numpy as np

    with np.load(os.path.join(workdir, f"ids_{name}.npz")) as data:
        return {k: data[k] for k in FIELDS}


def prepared(workdir: str) -> dict[str, Any]:
    """What `bench.serving.prepare.prepare` recorded in ``workdir``."""
    with open(os.path.join(workdir, PREPARED)) as f:
        return json.load(f)


def time_answers(step: Callable[[], float], warmup: int, repeats: int) -> dict[str, Any]:
    """`time_step` of a serving call; its return value is a checksum, not a loss."""
    timing = time_step(step, warmup, repeats)
    # time_step calls the step's return value a loss; here it is a checksum
    # that forces the outputs (and shows every variant computed something).
    timing["checksum_first"] = timing.pop("loss_first_step")
    timing["checksum_last"] = timing.pop("loss_last_step")
    return timing
