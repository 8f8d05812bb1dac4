"""Models that leave: albert_tf → Hugging Face layout → transformers, keras-hub, and back.

Every weight of the albert_tf model is random (biases and LayerNorm too), so a
weight written to the wrong place shows in the outputs. The references are
the independent implementations: transformers' PyTorch ALBERT and keras-hub's
`AlbertBackbone`, each loading the exported folder its own way.
"""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import torch
import transformers
from helpers.hf_reference import torch_inputs
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import random_batch, tiny_config

import albert_tf
from albert_tf.checkpoints.convert import convert
from albert_tf.checkpoints.saved_format import SETTINGS_FILE, read_weights, save_model
from albert_tf.tokenizers import WordPieceTokenizer, load_tokenizer

#: The issue's hidden shape: E != H, 2 groups, 4 layers.
SHAPE = dict(
    embedding_size=16,
    hidden_size=48,
    num_hidden_layers=4,
    num_hidden_groups=2,
    num_attention_heads=4,
    intermediate_size=96,
    max_position_embeddings=64,
    classifier_dropout_prob=0.0,
)


def _randomize(model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        centre = 1.0 if weight.path.endswith("gamma") else 0.0
        weight.assign(rng.normal(centre, 0.3, weight.shape).astype("float32"))


def _export(model_dir, out) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.convert",
            "--source=albert_tf",
            "--target=hf",
            f"--input={model_dir}",
            f"--output={out}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def pretrained(prepared, tmp_path_factory):
    """A random albert_tf pretraining model with the SentencePiece tokenizer, exported."""
    tokenizer = load_tokenizer(prepared.tokenizer_dir)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **SHAPE)
    model = albert_tf.AlbertPretrainingModel.from_albert_config(config)
    batch = random_batch(config.vocab_size)
    model(batch)
    _randomize(model, seed=0)
    base = tmp_path_factory.mktemp("export")
    save_model(model, base / "ours", tokenizer=tokenizer)
    run = _export(base / "ours", base / "hf")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "as AlbertForPreTraining" in run.stdout
    return {"model": model, "batch": batch, "base": base, "tokenizer": tokenizer}


def test_transformers_loads_the_export_and_agrees(pretrained):
    model, batch, folder = pretrained["model"], pretrained["batch"], pretrained["base"] / "hf"
    ours = model(batch)
    budget = albert_budget(model.config, batch["token_ids"].shape[1])
    hf = transformers.AlbertForPreTraining.from_pretrained(folder).eval()
    bare = transformers.AlbertModel.from_pretrained(folder).eval()
    with torch.no_grad():
        heads = hf(**torch_inputs(batch))
        base = bare(**torch_inputs(batch))
    mask = batch["padding_mask"][..., None].astype(bool)
    theirs = {
        "sequence_output": base.last_hidden_state.numpy(),
        "pooled_output": base.pooler_output.numpy(),
        "mlm_logits": heads.prediction_logits.numpy(),
        "sop_logits": heads.sop_logits.numpy(),
    }
    for key, value in theirs.items():
        mine = np.asarray(ours[key])
        if key in ("sequence_output", "mlm_logits"):  # padded positions are unspecified
            mine, value = np.where(mask, mine, 0), np.where(mask, value, 0)
        assert_normwise_close(mine, value, rtol=budget, what=key)
    assert np.abs(theirs["sequence_output"]).max() > 0.5  # not trivially small


def test_keras_hub_loads_the_export_and_agrees(pretrained):
    import keras_hub

    model, batch = pretrained["model"], pretrained["batch"]
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(pretrained["base"] / "hf"))
    theirs = backbone(batch)
    ours = model(batch)
    mask = batch["padding_mask"][..., None].astype(bool)
    budget = albert_budget(model.config, batch["token_ids"].shape[1])
    assert_normwise_close(
        np.where(mask, ours["sequence_output"], 0),
        np.where(mask, keras.ops.convert_to_numpy(theirs["sequence_output"]), 0),
        rtol=budget,
        what="keras-hub sequence_output",
    )
    assert_normwise_close(
        ours["pooled_output"], theirs["pooled_output"], rtol=budget, what="pooled_output"
    )


def test_the_tokenizer_leaves_with_the_model(pretrained):
    texts = ["The café's 1,000 visitors — don't count them!", "ALBERT shares layers."]
    ours = pretrained["tokenizer"].tokenize(np.array(texts)).to_list()
    theirs = transformers.AlbertTokenizer.from_pretrained(pretrained["base"] / "hf")
    assert [theirs.encode(t, add_special_tokens=False) for t in texts] == ours


def test_converting_back_gives_the_same_weights(pretrained):
    base = pretrained["base"]
    convert("hf", str(base / "hf"), str(base / "back"))
    original, back = read_weights(base / "ours"), read_weights(base / "back")
    assert sorted(back) == sorted(original)
    for name, array in original.items():
        np.testing.assert_array_equal(back[name], array, err_msg=name)
    assert albert_tf.load(base / "back").config == pretrained["model"].config


def test_sharing_hugging_face_cannot_express_is_refused_by_name(vocab, tmp_path):
    config = tiny_config(vocab_size=vocab, share="ffn")
    model = albert_tf.AlbertPretrainingModel.from_albert_config(config)
    model(random_batch(vocab))
    save_model(model, tmp_path / "ours")
    run = _export(tmp_path / "ours", tmp_path / "hf")
    assert run.returncode == 2, run.stderr[-2000:]
    assert "share='ffn'" in run.stderr and "FFN-only sharing" in run.stderr
    assert not (tmp_path / "hf").exists()


def test_embedding_equal_to_hidden_exports_the_identity_projection(vocab, tmp_path):
    from albert_tf.checkpoints.hf_export import export_hf

    config = tiny_config(vocab_size=vocab, embedding_size=48, hidden_size=48, hidden_act="relu")
    model = albert_tf.AlbertPretrainingModel.from_albert_config(config)
    batch = random_batch(vocab)
    model(batch)
    _randomize(model, seed=1)
    save_model(model, tmp_path / "ours")
    export_hf(str(tmp_path / "ours"), str(tmp_path / "hf"))
    hf = transformers.AlbertModel.from_pretrained(tmp_path / "hf").eval()
    projection = hf.encoder.embedding_hidden_mapping_in
    np.testing.assert_array_equal(projection.weight.detach().numpy(), np.eye(48))
    with torch.no_grad():
        pooled = hf(**torch_inputs(batch)).pooler_output.numpy()
    budget = albert_budget(config, batch["token_ids"].shape[1])
    assert_normwise_close(model(batch)["pooled_output"], pooled, rtol=budget, what="pooled")
    # Back again: the identity is dropped, the model has no projection.
    convert("hf", str(tmp_path / "hf"), str(tmp_path / "back"))
    assert not any("projection" in name for name in read_weights(tmp_path / "back"))


def test_a_relu_model_in_keras_hub_gets_gelu(vocab, tmp_path):
    """keras-hub's ALBERT hard-codes approximate GELU: a relu model (Google's Chinese
    base, xlarge, xxlarge) loads there without complaint and computes something else."""
    import keras_hub

    from albert_tf.checkpoints.hf_export import export_hf

    config = tiny_config(vocab_size=vocab, **SHAPE, hidden_act="relu")
    model = albert_tf.AlbertPretrainingModel.from_albert_config(config)
    batch = random_batch(vocab)
    model(batch)
    _randomize(model, seed=2)
    save_model(model, tmp_path / "ours")
    export_hf(str(tmp_path / "ours"), str(tmp_path / "hf"))
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "hf"))
    ours = np.asarray(model(batch)["pooled_output"])
    theirs = keras.ops.convert_to_numpy(backbone(batch)["pooled_output"])
    assert np.abs(ours - theirs).max() > 100 * albert_budget(config, 20) * np.abs(ours).max()
    # Hence --target=keras_hub refuses it, naming the activation.
    from albert_tf.checkpoints.hf_export import export_keras_hub
    from albert_tf.checkpoints.saved_format import CheckpointError

    with pytest.raises(CheckpointError, match="hidden_act='relu'"):
        export_keras_hub(str(tmp_path / "ours"), str(tmp_path / "hub"))


def test_a_classifier_leaves_as_a_keras_hub_preset_that_reads_raw_text(prepared, tmp_path):
    import keras_hub

    from albert_tf.tasks.classification.data import (
        ClassificationExample,
        classification_batches,
        encode_classification,
    )

    tokenizer = load_tokenizer(prepared.tokenizer_dir)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **SHAPE)
    classifier = albert_tf.AlbertTextClassifier.from_albert_config(config, num_labels=2)
    batch = random_batch(config.vocab_size)
    classifier(batch)
    _randomize(classifier, seed=5)
    save_model(classifier, tmp_path / "clf", tokenizer=tokenizer)
    settings = {"label_names": ["neg", "pos"], "max_seq_length": 32}
    (tmp_path / "clf" / SETTINGS_FILE).write_text(json.dumps(settings))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.convert",
            "--source=albert_tf",
            "--target=keras_hub",
            f"--input={tmp_path / 'clf'}",
            f"--output={tmp_path / 'hub'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "keras-hub preset (AlbertTextClassifier)" in run.stdout
    hub = keras_hub.models.AlbertTextClassifier.from_preset(str(tmp_path / "hub"))
    budget = albert_budget(config, 32)
    theirs = keras.ops.convert_to_numpy(hub(batch))  # the same ids, through keras-hub's graph
    assert_normwise_close(classifier(batch), theirs, rtol=budget, what="keras-hub logits")
    # Raw strings through keras-hub's own preprocessor. Lower-case text: keras-hub's
    # tokenizer runs the SentencePiece model without ALBERT's lower-casing.
    texts = ["albert shares its layers across depth.", "the model is small, and fast."]
    items = [ClassificationExample(str(i), t, label=0) for i, t in enumerate(texts)]
    (features, _), *_ = classification_batches(encode_classification(items, tokenizer, 32), 2)
    ours = classifier({k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    assert_normwise_close(ours, hub.predict(texts, verbose=0), rtol=budget, what="raw text")


def test_task_heads_leave_as_hugging_face_task_classes(tmp_path):
    """A Chinese WordPiece classifier with label names, and a multiple-choice scorer."""
    from albert_tf.checkpoints.hf_export import export_hf

    chars = list(dict.fromkeys("算法组的成员们精通各种研究和落地他们主要负责大熊猫你吃饭了吗"))
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars]) + "\n")
    tokenizer = WordPieceTokenizer(str(vocab_file))
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **SHAPE)
    batch = random_batch(config.vocab_size)
    budget = albert_budget(config, batch["token_ids"].shape[1])

    labels = ["负面", "中性", "正面"]
    classifier = albert_tf.AlbertTextClassifier.from_albert_config(config, num_labels=3)
    classifier(batch)
    _randomize(classifier, seed=3)
    save_model(classifier, tmp_path / "clf", tokenizer=tokenizer)
    (tmp_path / "clf" / SETTINGS_FILE).write_text(json.dumps({"label_names": labels}))
    run = _export(tmp_path / "clf", tmp_path / "clf_hf")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "as AlbertForSequenceClassification" in run.stdout
    hf = transformers.AlbertForSequenceClassification.from_pretrained(tmp_path / "clf_hf")
    assert [hf.config.id2label[i] for i in range(3)] == labels
    with torch.no_grad():
        logits = hf.eval()(**torch_inputs(batch)).logits.numpy()
    assert_normwise_close(classifier(batch), logits, rtol=budget, what="classifier logits")
    # Back in, the label names come along; without them the head's width decides.
    convert("hf", str(tmp_path / "clf_hf"), str(tmp_path / "clf_back"))
    back_settings = json.loads((tmp_path / "clf_back" / SETTINGS_FILE).read_text())
    assert back_settings["label_names"] == labels
    (tmp_path / "clf" / SETTINGS_FILE).unlink()
    export_hf(str(tmp_path / "clf"), str(tmp_path / "clf_unnamed"))
    unnamed = transformers.AlbertForSequenceClassification.from_pretrained(tmp_path / "clf_unnamed")
    assert unnamed.config.num_labels == 3 and unnamed.config.id2label[2] == "LABEL_2"
    text = "算法组的成员们精通各种AI算法, 他们主要负责研究."
    bert = transformers.BertTokenizer.from_pretrained(tmp_path / "clf_hf")
    assert (
        bert.encode(text, add_special_tokens=False)
        == tokenizer.tokenize(np.array([text])).to_list()[0]
    )

    scorer = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    other = random_batch(config.vocab_size, seed=1)
    choices = {k: np.stack([v, other[k]], axis=1) for k, v in batch.items()}  # [3, 2, 20]
    scorer(choices)
    _randomize(scorer, seed=4)
    save_model(scorer, tmp_path / "mc", tokenizer=tokenizer)
    assert export_hf(str(tmp_path / "mc"), str(tmp_path / "mc_hf"))["architecture"] == (
        "AlbertForMultipleChoice"
    )
    hf_mc = transformers.AlbertForMultipleChoice.from_pretrained(tmp_path / "mc_hf").eval()
    with torch.no_grad():
        theirs = hf_mc(**torch_inputs(choices)).logits.numpy()
    assert_normwise_close(scorer(choices), theirs, rtol=budget, what="multiple-choice logits")
