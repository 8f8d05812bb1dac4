"""The ``ours`` and ``ours_unfused`` variants: this package's real training step."""

from __future__ import annotations

import os
from collections.abc import Callable

from bench.step_workload import FULL, Shape, synthetic_batch


def albert_config_for(shape: Shape):
    """The preset at full size (checked against `shape`), else a tiny config."""
    import albert_tf

    if shape == FULL:
        config = albert_tf.get_preset("albert_base_v2")
    else:
        config = albert_tf.AlbertConfig(
            vocab_size=shape.vocab,
            embedding_size=shape.embed,
            hidden_size=shape.hidden,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            intermediate_size=shape.ffn,
        )
    # The preset keeps the v2 release's 0.1 dropout before the SOP classifier;
    # the peers have none. On a [B, H] vector its cost is nil either way.
    config = config.replace(classifier_dropout_prob=0.0)
    expected = {
        "vocab_size": shape.vocab,
        "embedding_size": shape.embed,
        "hidden_size": shape.hidden,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "intermediate_size": shape.ffn,
        "hidden_act": "gelu_new",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "max_position_embeddings": shape.max_position,
        "type_vocab_size": shape.type_vocab,
        "num_hidden_groups": 1,
        "inner_group_num": 1,
        "share": "all",
    }
    wrong = {k: (getattr(config, k), v) for k, v in expected.items() if getattr(config, k) != v}
    if wrong:
        raise ValueError(f"config differs from the benchmark shape (got, want): {wrong}")
    return config


def build_ours_step(
    shape: Shape, precision: str, workdir: str, fused_kernels: bool = True
) -> tuple[Callable[[], float], dict]:
    """This package's real training step on the shared batch.

    Builds the trainer's model, optimizer (LAMB, global-norm clipping) and
    replicated step (`trainer.build_model`, `build_optimizer`, `PretrainingSteps`)
    with no run directory, takes one batch of its input pipeline on synthetic shards
    for the structure and dtypes, fills it with the shared batch and returns a step
    that runs ``steps.train_fn(*batch)``: the input pipeline is not
    timed. Change the options here to benchmark another setup.
    """
    import keras
    import tensorflow as tf

    from albert_tf.training.pretraining.options import PretrainingOptions
    from albert_tf.training.pretraining.steps import PretrainingSteps
    from albert_tf.training.pretraining.trainer import build_inputs, build_model, build_optimizer
    from bench.input_pipeline import synthetic_vocab, write_synthetic_shards

    pattern = write_synthetic_shards(workdir, shape.seq, num_examples=8 * shape.batch)
    synthetic_vocab().save(workdir)  # the pipeline reads masking_vocab.json
    options = PretrainingOptions(
        model_dir=os.path.join(workdir, "model"),
        train_files=pattern,
        max_seq_length=shape.seq,
        max_predictions_per_seq=shape.predictions,
        train_batch_size=shape.batch,
        num_train_steps=1000,
        num_warmup_steps=10,
        optimizer="lamb",
        precision=precision,
        fused_kernels=fused_kernels,
        progress_bar=False,
    )
    # The trainer's own parts, without its run directory: the model, LAMB and the
    # replicated step, and one batch from its input pipeline for structure and dtypes.
    keras.utils.set_random_seed(options.seed)  # as the trainer seeds its weights
    model = build_model(albert_config_for(shape), options)
    steps = PretrainingSteps(model, build_optimizer(options), tf.distribute.get_strategy(), options)
    features, labels = next(iter(build_inputs(options)))
    data = synthetic_batch(shape)

    def fill(part: dict) -> dict:
        out = {}
        for key, like in part.items():
            value = tf.constant(data[key], like.dtype)
            if value.shape != like.shape:
                raise ValueError(f"{key}: pipeline gives {like.shape}, benchmark {value.shape}")
            out[key] = value
        return out

    batch = (fill(features), fill(labels))

    def step() -> float:
        out = steps.train_fn(*batch)
        return float(
            out["mlm_loss_sum"] / out["mlm_count"] + out["sop_loss_sum"] / out["sop_count"]
        )

    info = {
        "optimizer": "LAMB (AlbertOptimizer, layer adaptation) + clip by global norm 1.0",
        "model": "albert_tf.AlbertPretrainingModel (trainer.build_model)",
        "dtype_policy": {"float32": "float32", "bfloat16": "mixed_bfloat16"}[precision],
        "attention": "albert_tf encoder (padding mask applied)",
        "fused_kernels": fused_kernels,
        "note": "preset's classifier_dropout_prob 0.1 set to 0, as the peers",
    }
    return step, info
