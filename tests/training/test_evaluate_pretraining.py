"""`python -m albert_tf.evaluate_pretraining`: cross-task scoring for Table 5."""

import glob
import json
import os
import shutil

import numpy as np
import pytest
from helpers.commands import QUIET_CPU_ENV, run_command
from helpers.training_utils import scoring_batches, tiny_albert, tiny_options

from albert_tf.checkpoints.saved_format import save_model
from albert_tf.training.pretraining.trainer import PretrainingTrainer


@pytest.fixture(scope="module")
def trained(tmp_path_factory, prepared, vocab):
    root = tmp_path_factory.mktemp("evaluate")
    trainer = PretrainingTrainer(
        tiny_albert(vocab), tiny_options(root / "run", prepared, num_train_steps=30)
    )
    trainer.train(log=lambda *_: None)
    save_model(trainer.model, root / "final")
    return trainer, root


def _cli(*args):
    return run_command("evaluate_pretraining", *args, env=QUIET_CPU_ENV)


def test_scores_match_the_trainer_and_a_plain_numpy_count(trained, prepared):
    trainer, root = trained
    out = root / "sop.json"
    run = _cli(
        f"--model={root / 'final'}",
        f"--eval_files={prepared.eval_files}",
        "--batch_size=8",
        f"--output={out}",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["sentence_task"] == "sop"

    # The trainer's own evaluation (distributed code path, same seed and masks).
    own = trainer.evaluate(log=lambda *_: None)
    for key in ("mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"):
        assert results[key] == pytest.approx(own[key], abs=1e-5), key

    # Accuracies counted directly from the model's argmax, without the loss code.
    correct = total = mlm_correct = mlm_total = 0
    for features, labels in scoring_batches(prepared.eval_files):
        outputs = trainer.model(features, training=False)
        predicted = np.argmax(outputs["sop_logits"], axis=-1)
        correct += int((predicted == labels["sentence_order_label"].numpy()).sum())
        total += predicted.size
        weights = labels["mask_weights"].numpy() > 0
        guess = np.argmax(outputs["mlm_logits"], axis=-1)
        mlm_correct += int((guess == labels["mask_ids"].numpy())[weights].sum())
        mlm_total += int(weights.sum())
    assert results["sop_examples"] == total
    assert results["sop_accuracy"] == pytest.approx(correct / total)
    assert results["mlm_predictions"] == mlm_total
    assert results["mlm_accuracy"] == pytest.approx(mlm_correct / mlm_total)
    p = correct / total
    assert results["sop_accuracy_stderr"] == pytest.approx(np.sqrt(p * (1 - p) / total))


def test_scores_an_sop_model_on_nsp_pairs(trained, prepared, tmp_path):
    from albert_tf.data.shards import write_pretraining_data
    from albert_tf.tokenizers import load_tokenizer

    _, root = trained
    eval_corpus = os.path.join(
        os.path.dirname(os.path.dirname(prepared.eval_files)), "eval_corpus.jsonl"
    )
    written = write_pretraining_data(
        tokenizer=load_tokenizer(prepared.tokenizer_dir),
        output_dir=str(tmp_path / "nsp"),
        inputs=[eval_corpus],
        max_seq_length=32,
        sentence_task="nsp",
        dupe_factor=1,
        num_shards=1,
        log=None,
    )
    run = _cli(f"--model={root / 'final'}", f"--eval_files={tmp_path / 'nsp' / '*.tfrecord'}")
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout[run.stdout.index("{") :])
    assert results["sentence_task"] == "nsp"
    assert results["sop_examples"] == written.to_dict()["examples"]
    assert 0.0 <= results["sop_accuracy"] <= 1.0


def test_clear_errors(trained, prepared, tmp_path):
    _, root = trained
    missing = _cli(f"--model={root / 'final'}", f"--eval_files={tmp_path / 'none' / '*.tfrecord'}")
    assert missing.returncode != 0 and "matches no file" in missing.stderr
    # Shards written with a different vocabulary than the model's.
    other = tmp_path / "other"
    other.mkdir()
    for path in glob.glob(os.path.join(os.path.dirname(prepared.eval_files), "*")):
        shutil.copy(path, other)
    meta = json.loads((other / "metadata.json").read_text())
    meta["vocabulary_size"] += 7
    (other / "metadata.json").write_text(json.dumps(meta))
    wrong = _cli(f"--model={root / 'final'}", f"--eval_files={other / '*.tfrecord'}")
    assert wrong.returncode != 0 and "vocabulary" in wrong.stderr, wrong.stderr[-2000:]
