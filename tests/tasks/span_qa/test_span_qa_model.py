"""The span QA model against Hugging Face's ``AlbertForQuestionAnswering``: converted
weights give the same start and end logits both ways, and our decoding picks the
answers transformers' own question-answering pipeline picks, at the same characters."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers
from helpers.hf_reference import random_hf_model, torch_inputs
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import random_batch

from albert_tf.checkpoints.convert import convert
from albert_tf.checkpoints.hf_export import export_hf
from albert_tf.checkpoints.saved_format import load_task_model
from albert_tf.tasks.span_qa.model import AlbertSpanQA
from albert_tf.tasks.span_qa.preprocessing import Windowing, pack_qa
from albert_tf.tasks.span_qa.serving import SpanQAServingModule
from albert_tf.tokenizers import load_tokenizer


def _hf_qa_model(vocab_size: int = 120, seed: int = 4, positions: int = 64):
    model = random_hf_model(
        transformers.AlbertForQuestionAnswering,
        seed=seed,
        vocab_size=vocab_size,
        max_position_embeddings=positions,
    )
    with torch.no_grad():  # spread the logits so a wrong mapping cannot hide
        model.qa_outputs.weight.copy_(torch.randn_like(model.qa_outputs.weight))
    return model


def test_span_logits_parity_both_ways(tmp_path):
    hf_model = _hf_qa_model()
    hf_model.save_pretrained(tmp_path / "hf")
    _, converted = convert("hf", str(tmp_path / "hf"), str(tmp_path / "ours"))
    assert converted.task == "span_qa"
    model = load_task_model(tmp_path / "ours", "span_qa")
    assert isinstance(model, AlbertSpanQA)
    batch = random_batch(120, batch=4, seq=16, seed=5)
    with torch.no_grad():
        out = hf_model(**torch_inputs(batch))
    theirs = np.stack([out.start_logits.numpy(), out.end_logits.numpy()], -1)
    ours = np.asarray(model(batch))
    assert ours.shape == (4, 16, 2)
    budget = albert_budget(model.config, 16)
    assert_normwise_close(ours, theirs, rtol=budget, what="span logits from HF")
    assert np.ptp(ours[..., 0]) > 1e-3 and np.ptp(ours[..., 1]) > 1e-3

    export_hf(str(tmp_path / "ours"), str(tmp_path / "back"))
    config = json.loads((tmp_path / "back" / "config.json").read_text())
    assert config["architectures"] == ["AlbertForQuestionAnswering"]
    back = transformers.AlbertForQuestionAnswering.from_pretrained(tmp_path / "back").eval()
    with torch.no_grad():
        again = back(**torch_inputs(batch))
    again = np.stack([again.start_logits.numpy(), again.end_logits.numpy()], -1)
    assert_normwise_close(again, ours, rtol=budget, what="span logits to HF")


CONTEXTS = [
    "王明在北京工作，李华在上海读书。",
    "ALBERT shares one layer across the whole encoder, 所以参数很少。",
    "大熊猫住在成都动物园，人人都想摸一下。",
    "The quick brown fox jumps over the lazy dog near the river.",
]
QUESTIONS = ["王明在哪里工作？", "What does ALBERT share?", "大熊猫住在哪里？", "What jumps?"]


@pytest.fixture(scope="module")
def converted_qa(mc_models, tmp_path_factory):
    """A random HF QA model over the Chinese test vocabulary, converted to ours, and
    its tokenizer exported back to Hugging Face's layout beside it."""
    tmp_path = tmp_path_factory.mktemp("qa_parity")
    tokenizer = load_tokenizer(mc_models["zh"]["model"] / "tokenizer")
    hf_model = _hf_qa_model(tokenizer.vocabulary_size, seed=7, positions=128)
    hf_model.save_pretrained(tmp_path / "hf")
    convert("hf", str(tmp_path / "hf"), str(tmp_path / "ours"))
    tokenizer.save(tmp_path / "ours" / "tokenizer")
    export_hf(str(tmp_path / "ours"), str(tmp_path / "back"))
    return load_task_model(tmp_path / "ours", "span_qa"), tokenizer, tmp_path / "back"


def test_answers_equal_the_transformers_pipeline(converted_qa):
    model, tokenizer, hf_dir = converted_qa
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir, use_fast=True)
    assert hf_tokenizer.is_fast  # the pipeline needs its offsets
    hf_model = transformers.AlbertForQuestionAnswering.from_pretrained(hf_dir).eval()
    pipe = transformers.pipeline("question-answering", model=hf_model, tokenizer=hf_tokenizer)
    module = SpanQAServingModule(model, tokenizer, Windowing(128), max_answer_length=8)
    ours = module.serving_default(tf.constant(QUESTIONS), tf.constant(CONTEXTS))
    widened = 0
    for row, (question, context) in enumerate(zip(QUESTIONS, CONTEXTS, strict=True)):
        # One window each: the pipeline's softmax product and our logit sum rank the
        # same spans first. Its align_to_words=True sums the scores of spans that widen
        # to the same words; we widen the best span (the official run_squad's words),
        # so compare its best token span, widened to words by the fast tokenizer's own map.
        theirs = pipe(
            question=question,
            context=context,
            max_answer_len=8,
            max_seq_len=128,
            align_to_words=False,
        )
        encoding = hf_tokenizer(question, context)
        first = encoding.token_to_word(encoding.char_to_token(theirs["start"], sequence_index=1))
        last = encoding.token_to_word(encoding.char_to_token(theirs["end"] - 1, sequence_index=1))
        want = (
            encoding.word_to_chars(first, sequence_index=1).start,
            encoding.word_to_chars(last, sequence_index=1).end,
        )
        widened += want != (theirs["start"], theirs["end"])
        start, end = int(ours["start"][row]), int(ours["end"][row])
        assert (start, end) == want, (row, theirs)
        assert ours["answer"][row].numpy().decode() == context[start:end]
    assert widened  # some best span began or ended inside a word


def test_windows_equal_hf_tokenizer_ids(converted_qa):
    # [CLS] question [SEP] context [SEP] with token types 0 then 1, as Hugging Face packs.
    _, tokenizer, hf_dir = converted_qa
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir, use_fast=True)
    packed = pack_qa(tf.constant(QUESTIONS), tf.constant(CONTEXTS), tokenizer, Windowing(128))
    for row, (question, context) in enumerate(zip(QUESTIONS, CONTEXTS, strict=True)):
        want = hf_tokenizer(question, context)
        n = len(want["input_ids"])
        assert packed["token_ids"][row, :n].numpy().tolist() == want["input_ids"]
        assert packed["segment_ids"][row, :n].numpy().tolist() == want["token_type_ids"]
        assert packed["padding_mask"][row].numpy().sum() == n
