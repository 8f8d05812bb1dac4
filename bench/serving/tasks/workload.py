"""What `bench.serving.tasks` measures: its tasks, variants, workloads and work directory.

Shared by the runner (`bench.serving.tasks.benchmark`), the preparation
(`bench.serving.tasks.prepare`), our variants (`bench.serving.tasks.ours`), the peers
(`bench.serving.tasks.peers`) and the report (`bench.serving.tasks.report`). Nothing
here imports TensorFlow or torch: the peers' workers must not load TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from bench.common import REPO
from bench.serving.tasks import items
from bench.serving.workdir import PREPARED


@dataclasses.dataclass(frozen=True)
class TaskBench:
    """One task: the shipped model it starts from and the requests it is sent.

    ``shipped`` is a float32 export under ``models/exported`` whose checkpoint
    `albert_tf.serving.recovery.recover_checkpoint` rebuilds, with the config fields
    that shapes do not tell taken from ``pretrained`` (the shipped encoder it was
    fine-tuned from); ``head`` are the recovered head's constructor arguments (the
    tagger's encoder alone is recovered: `bench.serving.tasks.prepare.tagger_encoder`).
    ``workloads``: name → requests in one call.
    """

    name: str
    shipped: str
    pretrained: str
    head: dict[str, Any]
    workloads: dict[str, int]
    pipeline: str


TASKS = {
    "span_qa": TaskBench(
        "span_qa",
        "albert_qa_en_pico/1",
        "albert_tiny_en_books_pubmed",
        {},
        {"batch1": 1, "batch32": 32},
        "question-answering",
    ),
    # The shipped tagger's BiLSTM + CRF head has no Hugging Face form: the benchmark
    # tunes a dense head on its encoder (`bench.serving.tasks.prepare.dense_tagger`).
    "tagging": TaskBench(
        "tagging",
        "albert_ner_zh/2",
        "albert_tiny_zh_peoples_daily",
        {},
        {"paragraph": 1, "three_windows": 1},
        "token-classification",
    ),
    "classification": TaskBench(
        "classification",
        "albert_reviews_zh/1",
        "albert_tiny_zh_peoples_daily",
        {"num_labels": 2},
        {"batch1": 1, "batch32": 32},
        "text-classification",
    ),
}
SHIPPED = os.path.join(REPO, "models", "exported")
PRETRAINED = os.path.join(REPO, "models", "pretrained")

#: Our raw-text SavedModel: serving precision, XLA-compiled forward pass.
SAVEDMODELS = {
    "savedmodel": ("float32", False),
    "savedmodel_bf16": ("bfloat16", False),
    "savedmodel_int8": ("int8", False),
    "savedmodel_xla": ("float32", True),
    "savedmodel_xla_bf16": ("bfloat16", True),
}
#: ONNX Runtime on the Hugging Face model, through onnxruntime.transformers' optimizer,
#: float32 and quantize_dynamic int8, inside the Hugging Face pipeline's own pre- and
#: post-processing (as optimum's ORTModel serves it).
ORT = {"ort_opt_fp32": "optimized", "ort_opt_int8": "optimized_int8"}
VARIANTS = (*SAVEDMODELS, "hf", *ORT)
SMOKE_VARIANTS = ("savedmodel", "savedmodel_xla", "hf", "ort_opt_int8")
#: Every answer is compared with this variant's.
REFERENCE = "savedmodel"


def task_dir(workdir: str, task: str) -> str:
    return os.path.join(workdir, task)


def hf_dir(workdir: str, task: str) -> str:
    """The task's model in Hugging Face's layout (``convert --target=hf``)."""
    return os.path.join(task_dir(workdir, task), "hf")


def requests(task: str, workload: str) -> dict[str, list[str]]:
    """The inputs of one call: the SavedModel's signature inputs by name."""
    count = TASKS[task].workloads[workload]
    if task == "span_qa":
        chosen = items.qa_items(count)
        return {
            "question": [x["question"] for x in chosen],
            "context": [x["context"] for x in chosen],
        }
    if task == "tagging":
        return {"text": [items.NEWS_LONG if workload == "three_windows" else items.NEWS_PARAGRAPH]}
    return {"text": items.reviews(count)}


def prepared(workdir: str) -> dict[str, Any]:
    with open(os.path.join(workdir, PREPARED)) as f:
        return json.load(f)
