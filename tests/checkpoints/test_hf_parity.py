"""Numerical parity with Hugging Face's PyTorch ALBERT after conversion."""

import numpy as np
import pytest
import torch
import transformers
from helpers.hf_reference import max_abs_diff, random_hf_model, torch_inputs
from helpers.testing_utils import random_batch

import albert_tf
from albert_tf.checkpoints.convert import convert
from albert_tf.checkpoints.saved_format import CheckpointError

TOLERANCE = 1e-5


def _pretraining_outputs(hf_model, batch):
    with torch.no_grad():
        inputs = torch_inputs(batch)
        base = hf_model.albert(**inputs, output_hidden_states=True)
        heads = hf_model(**inputs)
    return {
        "sequence_output": base.last_hidden_state.numpy(),
        "pooled_output": base.pooler_output.numpy(),
        "mlm_logits": heads.prediction_logits.numpy(),
        "sop_logits": heads.sop_logits.numpy(),
        "hidden_states": [h.numpy() for h in base.hidden_states],
    }


def _assert_pretraining_parity(hf_model, folder, tmp_path):
    _, converted = convert("hf", str(folder), str(tmp_path / "ours"))
    assert set(converted.heads) == {"mlm_head", "sop_head"}
    model = albert_tf.load(tmp_path / "ours")  # through the saved format
    batch = random_batch(hf_model.config.vocab_size)
    ours, theirs = model(batch), _pretraining_outputs(hf_model, batch)
    diffs = {
        k: max_abs_diff(ours[k], theirs[k])
        for k in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits")
    }
    assert max(diffs.values()) <= TOLERANCE, diffs
    # The outputs are not trivially small: a wrong mapping would show.
    assert np.abs(theirs["sequence_output"]).max() > 0.5
    return diffs


@pytest.mark.parametrize("hidden_act", ["gelu_new", "relu", "gelu"])
def test_pretraining_parity_safetensors(tmp_path, hidden_act):
    hf_model = random_hf_model(transformers.AlbertForPreTraining, hidden_act=hidden_act)
    hf_model.save_pretrained(tmp_path / "hf")
    assert (tmp_path / "hf" / "model.safetensors").exists()
    diffs = _assert_pretraining_parity(hf_model, tmp_path / "hf", tmp_path)
    print(hidden_act, diffs)


def test_pretraining_parity_pytorch_bin(tmp_path):
    hf_model = random_hf_model(transformers.AlbertForPreTraining, seed=1)
    hf_model.save_pretrained(tmp_path / "hf", safe_serialization=False)
    assert (tmp_path / "hf" / "pytorch_model.bin").exists()
    _assert_pretraining_parity(hf_model, tmp_path / "hf", tmp_path)


def test_layer_norm_eps_from_config_reaches_every_layer_norm(tmp_path):
    # A large epsilon changes outputs visibly; parity proves it is honoured in
    # the embeddings, every encoder LayerNorm and the MLM head.
    hf_model = random_hf_model(transformers.AlbertForPreTraining, seed=2, layer_norm_eps=0.5)
    hf_model.save_pretrained(tmp_path / "hf")
    _assert_pretraining_parity(hf_model, tmp_path / "hf", tmp_path)


def test_hidden_states_match_per_layer(tmp_path):
    hf_model = random_hf_model(
        transformers.AlbertForPreTraining, num_hidden_groups=2, inner_group_num=1
    )
    hf_model.save_pretrained(tmp_path / "hf")
    convert("hf", str(tmp_path / "hf"), str(tmp_path / "ours"))
    config = albert_tf.load(tmp_path / "ours").config
    backbone = albert_tf.AlbertBackbone(config, output_hidden_states=True)
    loaded = albert_tf.load(tmp_path / "ours")
    backbone.set_weights(loaded.backbone.get_weights())
    batch = random_batch(config.vocab_size)
    ours = backbone(batch)["hidden_states"]
    theirs = _pretraining_outputs(hf_model, batch)["hidden_states"]
    assert len(ours) == len(theirs) == config.num_hidden_layers + 1
    for a, b in zip(ours, theirs, strict=True):
        assert max_abs_diff(a, b) <= TOLERANCE


def test_embedding_equal_to_hidden_without_projection(tmp_path):
    hf_model = random_hf_model(transformers.AlbertForPreTraining, embedding_size=48)
    with torch.no_grad():  # HF keeps a mapping even when E == H; make it a no-op
        hf_model.albert.encoder.embedding_hidden_mapping_in.weight.copy_(torch.eye(48))
        hf_model.albert.encoder.embedding_hidden_mapping_in.bias.zero_()
    hf_model.save_pretrained(tmp_path / "hf")
    _assert_pretraining_parity(hf_model, tmp_path / "hf", tmp_path)
    with torch.no_grad():
        hf_model.albert.encoder.embedding_hidden_mapping_in.bias.fill_(0.1)
    hf_model.save_pretrained(tmp_path / "hf2")
    with pytest.raises(CheckpointError, match="not the identity"):
        convert("hf", str(tmp_path / "hf2"), str(tmp_path / "ours2"))


def test_multiple_choice_parity_and_absent_options(tmp_path):
    hf_model = random_hf_model(transformers.AlbertForMultipleChoice, seed=3)
    with torch.no_grad():  # spread the scores so a wrong mapping cannot hide
        hf_model.classifier.weight.copy_(torch.randn_like(hf_model.classifier.weight))
    hf_model.save_pretrained(tmp_path / "hf")
    _, converted = convert("hf", str(tmp_path / "hf"), str(tmp_path / "ours"))
    assert converted.task == "multiple_choice"
    model = albert_tf.load_task_model(tmp_path / "ours", "multiple_choice")
    flat = random_batch(120, batch=8, seq=16, seed=4)  # 2 questions × 4 options
    batch = {k: v.reshape(2, 4, 16) for k, v in flat.items()}
    with torch.no_grad():
        theirs = hf_model(**{k: v.reshape(2, 4, 16) for k, v in torch_inputs(flat).items()})
    ours = np.asarray(model(batch))
    assert max_abs_diff(ours, theirs.logits.numpy()) <= TOLERANCE
    assert np.ptp(ours, axis=-1).min() > 1e-2  # options really score differently

    # Question 0 has only 3 options: the 4th is absent, not filler text.
    batch["padding_mask"][0, 3] = 0
    masked = np.asarray(model(batch))
    probabilities = np.exp(masked - masked.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    assert probabilities[0, 3] == 0.0
    assert max_abs_diff(masked[0, :3], ours[0, :3]) <= TOLERANCE
    assert max_abs_diff(masked[1], ours[1]) <= TOLERANCE


@pytest.mark.parametrize("num_labels", [3, 1])
def test_sequence_classification_parity(tmp_path, num_labels):
    hf_model = random_hf_model(
        transformers.AlbertForSequenceClassification, seed=6, num_labels=num_labels
    )
    with torch.no_grad():  # spread the logits so a wrong mapping cannot hide
        hf_model.classifier.weight.copy_(torch.randn_like(hf_model.classifier.weight))
    hf_model.save_pretrained(tmp_path / "hf")
    _, converted = convert("hf", str(tmp_path / "hf"), str(tmp_path / "ours"))
    assert converted.task == "classification"
    model = albert_tf.load_task_model(tmp_path / "ours", "classification")
    assert model.num_labels == num_labels
    batch = random_batch(120, batch=6, seq=16, seed=7)
    with torch.no_grad():
        theirs = hf_model(**torch_inputs(batch)).logits.numpy()
    ours = np.asarray(model(batch))
    assert ours.shape == (6, num_labels)
    assert max_abs_diff(ours, theirs) <= TOLERANCE
    assert np.ptp(ours, axis=0).min() > 1e-3  # inputs really score differently


def test_classifier_head_is_not_taken_for_a_multiple_choice_scorer(tmp_path):
    # Both HF heads are "classifier": a 1-label sequence classifier must not
    # become a multiple-choice model, nor a multiple-choice one a classifier.
    for model_class, task in (
        (transformers.AlbertForSequenceClassification, "classification"),
        (transformers.AlbertForMultipleChoice, "multiple_choice"),
    ):
        folder = tmp_path / model_class.__name__
        random_hf_model(model_class, seed=8, num_labels=1).save_pretrained(folder / "hf")
        _, converted = convert("hf", str(folder / "hf"), str(folder / "ours"))
        assert converted.task == task, model_class.__name__


def test_masked_lm_without_sop_gets_fresh_sop_head(tmp_path):
    hf_model = random_hf_model(transformers.AlbertForMaskedLM, seed=5)
    hf_model.save_pretrained(tmp_path / "hf")
    _, converted = convert("hf", str(tmp_path / "hf"), str(tmp_path / "ours"))
    assert converted.heads == ["mlm_head"]
    assert converted.fresh == ["pooler", "sop_head"]
    model = albert_tf.load(tmp_path / "ours")
    batch = random_batch(120)
    with torch.no_grad():
        theirs = hf_model(**torch_inputs(batch)).logits.numpy()
    assert max_abs_diff(model(batch)["mlm_logits"], theirs) <= TOLERANCE


def test_wrong_config_is_a_named_error(tmp_path):
    hf_model = random_hf_model(transformers.AlbertForPreTraining)
    hf_model.save_pretrained(tmp_path / "hf")
    wrong = albert_tf.AlbertConfig.from_json(tmp_path / "hf" / "config.json").replace(
        num_hidden_groups=1
    )
    wrong.to_hf_json(tmp_path / "wrong.json")
    with pytest.raises(CheckpointError, match=r"does not know.*albert_layer_groups\.1"):
        convert("hf", str(tmp_path / "hf"), str(tmp_path / "o"), str(tmp_path / "wrong.json"))


def test_convert_command_line(tmp_path):
    import subprocess
    import sys

    hf_model = random_hf_model(transformers.AlbertForMaskedLM, seed=6)
    hf_model.save_pretrained(tmp_path / "hf")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.convert",
            "--source=hf",
            f"--input={tmp_path / 'hf'}",
            f"--output={tmp_path / 'ours'}",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "note: sop_head is not in the source" in result.stdout
    batch = random_batch(120)
    with torch.no_grad():
        theirs = hf_model(**torch_inputs(batch)).logits.numpy()
    assert max_abs_diff(albert_tf.load(tmp_path / "ours")(batch)["mlm_logits"], theirs) <= TOLERANCE


def test_albert_chinese_small_layout_converts_with_its_bert_vocab(tmp_path):
    """The community's albert_chinese_* folders: config.json, pytorch_model.bin and
    BERT's vocab.txt (no spiece.model). Written here by transformers' own
    save_pretrained, then converted, tokenised, fine-tuned a few steps and exported."""
    import subprocess
    import sys

    import tensorflow as tf

    from albert_tf.serving import export_saved_model
    from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample
    from albert_tf.tasks.multiple_choice.trainer import MultipleChoiceTrainer
    from albert_tf.tokenizers import load_tokenizer

    text_chars = "算法组的成员们精通各种研究和落地他们主要负责大熊猫你吃饭了吗我没上吉士果"
    chars = list(dict.fromkeys(text_chars))  # a vocab line per distinct character
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, "ai", "##s"]
    folder = tmp_path / "albert_chinese_small"
    folder.mkdir()
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    transformers.BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(folder)
    hf_model = random_hf_model(transformers.AlbertForMaskedLM, seed=8, vocab_size=len(vocab))
    hf_model.save_pretrained(folder, safe_serialization=False)  # pytorch_model.bin
    assert {"config.json", "pytorch_model.bin", "vocab.txt"} <= {p.name for p in folder.iterdir()}

    out = tmp_path / "converted"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.convert",
            "--source=hf",
            f"--input={folder}",
            f"--output={out}",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"tokenizer: wordpiece ({len(vocab)} entries)" in result.stdout

    text = "算法组的成员们精通各种AI算法, 他们主要负责研究."
    ours = load_tokenizer(out / "tokenizer")
    theirs = transformers.BertTokenizer.from_pretrained(folder)
    assert ours.tokenize(tf.constant([text])).to_list()[0] == theirs.encode(
        text, add_special_tokens=False
    )

    # A fresh head on the converted backbone.
    model = albert_tf.load_task_model(out, "multiple_choice")
    items = [
        MultipleChoiceExample(
            str(i),
            "算法组的成员们精通各种AI算法.",
            "",
            ["他们主要负责研究和落地.", "你吃饭了吗?"],
            i % 2,
        )
        for i in range(8)
    ]
    trainer = MultipleChoiceTrainer(
        model,
        ours,
        output_dir=tmp_path / "ft",
        max_seq_length=32,
        max_qa_length=16,
        batch_size=4,
        learning_rate=1e-3,
        num_train_steps=2,
        eval_every=2,
        progress=False,
    )
    best = trainer.fit(items, items)["best_dir"]
    saved = export_saved_model(best, tmp_path / "exported" / "albert_chinese_small")
    served = tf.saved_model.load(saved).signatures["serving_default"](
        context=tf.constant([items[0].context]),
        question=tf.constant([""]),
        options=tf.constant([items[0].options]),
    )
    np.testing.assert_allclose(served["probabilities"].numpy().sum(), 1.0, atol=1e-5)
