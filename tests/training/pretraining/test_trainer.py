"""In-process pretraining runs: learning, accumulation, precision, XLA."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from helpers.training_utils import flat_weights, tiny_albert, tiny_options

from albert_tf.training.pretraining.trainer import PretrainingTrainer


def _train(tmp_path, prepared, vocab, name, config_overrides=None, **options):
    trainer = PretrainingTrainer(
        tiny_albert(vocab, **(config_overrides or {})),
        tiny_options(tmp_path / name, prepared, **options),
    )
    trainer.train(log=lambda *_: None)
    return trainer


def test_loss_falls_and_eval_reports_both_tasks(tmp_path, prepared, vocab):
    trainer = PretrainingTrainer(
        tiny_albert(vocab), tiny_options(tmp_path / "run", prepared, num_train_steps=40)
    )
    before = trainer.evaluate(log=lambda *_: None)
    trainer.train(log=lambda *_: None)
    after = trainer.evaluate(log=lambda *_: None)
    assert trainer.step == 40
    assert after["mlm_loss"] < before["mlm_loss"] - 0.5, (before, after)
    assert set(after) >= {"mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"}
    assert after["mlm_predictions"] > 100  # the whole held-out set, partial batch included


def test_learning_curve_has_one_eval_line_per_step(tmp_path, prepared, vocab):
    trainer = _train(tmp_path, prepared, vocab, "run", num_train_steps=20, eval_every_steps=10)
    final = trainer.evaluate(log=lambda *_: None)  # as the entry point does at the end
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    evals = [r for r in map(json.loads, lines) if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [10, 20]
    assert all(isinstance(r["step"], int) for r in evals)
    assert evals[-1]["sop_accuracy"] == final["sop_accuracy"]
    assert evals[-1]["mlm_loss"] == final["mlm_loss"]


def test_no_sentence_task_trains_mlm_and_leaves_the_unused_heads_alone(tmp_path, prepared, vocab):
    # The paper's "None" condition: no gradient reaches the pooler or the SOP
    # head, so they must stay as initialised (not crash, not decay).
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(tmp_path / "none", prepared, num_train_steps=10, sentence_task="none"),
    )
    model = trainer.model
    unused = [*model.sop_head.weights, *model.backbone.pooler.weights]
    before_unused = [v.numpy().copy() for v in unused]
    before_encoder = [v.numpy().copy() for v in model.backbone.encoder.weights]
    trainer.train(log=lambda *_: None)
    assert trainer.step == 10
    for b, v in zip(before_unused, unused, strict=True):
        np.testing.assert_array_equal(b, v.numpy(), err_msg=v.path)
    changed = [
        not np.array_equal(b, v.numpy())
        for b, v in zip(before_encoder, model.backbone.encoder.weights, strict=True)
    ]
    assert all(changed)
    results = trainer.evaluate(log=lambda *_: None)
    assert np.isfinite(results["mlm_loss"]) and 0.0 <= results["sop_accuracy"] <= 1.0


def test_gradient_accumulation_equals_one_big_batch(tmp_path, prepared, vocab):
    one = _train(tmp_path, prepared, vocab, "one", train_batch_size=8)
    two = _train(
        tmp_path, prepared, vocab, "two", train_batch_size=8, gradient_accumulation_steps=2
    )
    diff = np.abs(flat_weights(one.model) - flat_weights(two.model)).max()
    moved = np.abs(
        flat_weights(one.model)
        - flat_weights(
            PretrainingTrainer(tiny_albert(vocab), tiny_options(tmp_path / "init", prepared)).model
        )
    ).max()
    assert moved > 1e-3  # training changed the weights ...
    assert diff < 1e-5, diff  # ... identically with and without accumulation


@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_mixed_precision_tracks_float32(tmp_path, prepared, vocab, precision):
    fp32 = _train(tmp_path, prepared, vocab, "fp32", num_train_steps=15)
    mixed = _train(tmp_path, prepared, vocab, precision, num_train_steps=15, precision=precision)
    a = fp32.evaluate(log=lambda *_: None)
    b = mixed.evaluate(log=lambda *_: None)
    assert mixed.model.backbone.dtype_policy.compute_dtype == precision
    assert mixed.model.weights[0].dtype == "float32"  # master weights stay fp32
    assert np.isfinite(b["mlm_loss"])
    assert abs(a["mlm_loss"] - b["mlm_loss"]) < 0.05 * a["mlm_loss"], (a, b)


def test_xla_matches_graph_mode(tmp_path, prepared, vocab):
    plain = _train(tmp_path, prepared, vocab, "plain")
    xla = _train(tmp_path, prepared, vocab, "xla", jit_compile=True)
    assert np.abs(flat_weights(plain.model) - flat_weights(xla.model)).max() < 1e-4


def _step_op_types(trainer) -> set[str]:
    batch = next(trainer.train_iterator)
    graph_def = trainer.steps.train_fn.get_concrete_function(*batch).graph.as_graph_def()
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    return {node.op for node in nodes}


def test_fused_kernels_train_like_stock_ops(tmp_path, prepared, vocab):
    fused = _train(tmp_path, prepared, vocab, "fused")
    stock = _train(tmp_path, prepared, vocab, "stock", fused_kernels=False)
    assert {"AlbertGeluTanh", "AlbertGeluTanhGrad", "AlbertLayerNorm", "AlbertLayerNormGrad"} <= (
        _step_op_types(fused)
    )
    assert not any(op.startswith("Albert") for op in _step_op_types(stock))
    initial = PretrainingTrainer(tiny_albert(vocab), tiny_options(tmp_path / "init", prepared))
    learned = np.abs(flat_weights(fused.model) - flat_weights(initial.model)).max()
    differ = np.abs(flat_weights(fused.model) - flat_weights(stock.model)).max()
    assert differ < 1e-4 < 1e-2 < learned, (differ, learned)


def test_incompatible_model_dir_is_refused(tmp_path, prepared, vocab):
    _train(tmp_path, prepared, vocab, "run", num_train_steps=2)
    with pytest.raises(ValueError, match="hidden_size: 32 -> 64"):
        PretrainingTrainer(
            tiny_albert(vocab, hidden_size=64),
            tiny_options(tmp_path / "run", prepared),
        )


def test_batch_not_divisible_by_accumulation(tmp_path, prepared, vocab):
    with pytest.raises(ValueError, match="not divisible"):
        PretrainingTrainer(
            tiny_albert(vocab),
            tiny_options(
                tmp_path / "x", prepared, train_batch_size=9, gradient_accumulation_steps=2
            ),
        )


def test_compiled_loops_of_steps_train_and_log_like_one_step_a_call(tmp_path, prepared, vocab):
    # Loops stop at every logging and checkpoint step: 7 steps with metrics every 3
    # and a checkpoint at 4 run as loops of 3, 1, 2 and 1 (steps_per_loop=5).
    runs = {}
    for steps_per_loop in (1, 5):
        name = f"loop{steps_per_loop}"
        trainer = PretrainingTrainer(
            tiny_albert(vocab),
            tiny_options(
                tmp_path / name,
                prepared,
                num_train_steps=7,
                log_every_steps=3,
                save_checkpoints_steps=4,
                steps_per_loop=steps_per_loop,
            ),
        )
        trainer.train(log=lambda *_: None)
        assert trainer.step == 7
        metrics = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").open()]
        runs[steps_per_loop] = (trainer, metrics)
    (one, metrics_one), (loop, metrics_loop) = runs[1], runs[5]
    assert np.abs(flat_weights(one.model) - flat_weights(loop.model)).max() < 1e-6
    assert [m["step"] for m in metrics_loop] == [m["step"] for m in metrics_one] == [3, 6, 7]
    for a, b in zip(metrics_one, metrics_loop, strict=True):
        for key in ("mlm_loss", "sop_loss", "mlm_accuracy", "grad_norm", "skipped_steps"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), key
    saved = [
        os.path.basename(p)
        for p in tf.io.gfile.glob(str(tmp_path / "loop5/checkpoints/ckpt-*.index"))
    ]
    assert sorted(saved) == ["ckpt-4.index", "ckpt-7.index"]
    assert loop.steps.train_loop_fn.experimental_get_tracing_count() == 1


def test_compiled_loops_take_gradient_accumulation(tmp_path, prepared, vocab):
    # The loop's arithmetic is checked in tests/training/test_accumulated_loops.py;
    # here the trainer feeds it micro-batches and logs what it sums.
    from helpers.numerics import albert_depth_and_width, float32_budget

    runs = {}
    for steps_per_loop in (1, 2):
        name = f"accumulated{steps_per_loop}"
        runs[steps_per_loop] = _train(
            tmp_path,
            prepared,
            vocab,
            name,
            num_train_steps=4,
            log_every_steps=2,
            gradient_accumulation_steps=2,
            steps_per_loop=steps_per_loop,
        )
    one, loop = runs[1], runs[2]
    assert one.step == loop.step == 4
    assert loop.steps.train_loop_fn.experimental_get_tracing_count() == 1
    metrics = {
        n: [json.loads(line) for line in (tmp_path / f"accumulated{n}/metrics.jsonl").open()]
        for n in runs
    }
    assert [m["step"] for m in metrics[2]] == [m["step"] for m in metrics[1]] == [2, 4]
    depth, width = albert_depth_and_width(one.config, one.options.max_seq_length)
    rtol = float32_budget(depth=2 * depth, width=width)  # forward and backward
    for a, b in zip(metrics[1], metrics[2], strict=True):
        for key in ("mlm_loss", "sop_loss", "grad_norm"):
            assert b[key] == pytest.approx(a[key], rel=rtol), key


def test_steps_per_loop_refuses_what_it_cannot_do(tmp_path, prepared):
    for overrides, message in (
        ({"steps_per_loop": 0}, "at least 1"),
        ({"steps_per_loop": 4, "faults": "nonfinite_at_step:2"}, "fault injection"),
    ):
        with pytest.raises(ValueError, match=message):
            tiny_options(tmp_path, prepared, **overrides).validate(1)
