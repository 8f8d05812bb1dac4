"""The tagger against Hugging Face's ``AlbertForTokenClassification``: converted
weights give the same logits, and our export loads back into transformers."""

from __future__ import annotations

import json

import numpy as np
import torch
import transformers
from helpers.hf_reference import random_hf_model, torch_inputs
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import random_batch

from albert_tf.checkpoints.convert import convert
from albert_tf.checkpoints.hf_export import export_hf
from albert_tf.checkpoints.saved_format import load_task_model
from albert_tf.tasks.tagging.model import AlbertTokenClassifier

TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def test_token_classification_parity_both_ways(tmp_path):
    hf_model = random_hf_model(
        transformers.AlbertForTokenClassification,
        seed=9,
        num_labels=len(TAGS),
        id2label=dict(enumerate(TAGS)),
        label2id={t: i for i, t in enumerate(TAGS)},
    )
    with torch.no_grad():  # spread the logits so a wrong mapping cannot hide
        hf_model.classifier.weight.copy_(torch.randn_like(hf_model.classifier.weight))
    hf_model.save_pretrained(tmp_path / "hf")
    _, converted = convert("hf", str(tmp_path / "hf"), str(tmp_path / "ours"))
    assert converted.task == "tagging"
    settings = json.loads((tmp_path / "ours" / "finetune.json").read_text())
    assert settings == {"task": "tagging", "label_names": TAGS}
    model = load_task_model(tmp_path / "ours", "tagging")
    assert isinstance(model, AlbertTokenClassifier) and model.num_tags == len(TAGS)
    batch = random_batch(120, batch=4, seq=16, seed=3)
    with torch.no_grad():
        theirs = hf_model(**torch_inputs(batch)).logits.numpy()
    ours = np.asarray(model(batch))
    assert ours.shape == (4, 16, len(TAGS))
    budget = albert_budget(model.config, 16)
    assert_normwise_close(ours, theirs, rtol=budget, what="token logits from HF")
    assert np.ptp(ours, axis=(0, 1)).min() > 1e-3  # pieces really score differently

    export_hf(str(tmp_path / "ours"), str(tmp_path / "back"))
    config = json.loads((tmp_path / "back" / "config.json").read_text())
    assert config["architectures"] == ["AlbertForTokenClassification"]
    assert config["id2label"] == {str(i): t for i, t in enumerate(TAGS)}
    back = transformers.AlbertForTokenClassification.from_pretrained(tmp_path / "back").eval()
    with torch.no_grad():
        again = back(**torch_inputs(batch)).logits.numpy()
    assert_normwise_close(again, ours, rtol=budget, what="token logits to HF")
