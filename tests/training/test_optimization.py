"""Our LAMB/AdamW against a NumPy transcription of the official update rule."""

import keras
import numpy as np
import pytest

from albert_tf.training.optimization import AlbertOptimizer, WarmupPolynomialDecay


def official_lamb(
    params, grads_per_step, lr, wd=0.01, b1=0.9, b2=0.999, eps=1e-6, excluded=(), adapt=True
):
    """google-research/albert lamb_optimizer.py, step by step, in NumPy."""
    params = {k: v.astype(np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for grads in grads_per_step:
        for name, g in grads.items():
            m[name] = b1 * m[name] + (1 - b1) * g
            v[name] = b2 * v[name] + (1 - b2) * g * g
            update = m[name] / (np.sqrt(v[name]) + eps)
            ratio = 1.0
            if name not in excluded:
                update = update + wd * params[name]
                if adapt:
                    w_norm, u_norm = np.linalg.norm(params[name]), np.linalg.norm(update)
                    ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            params[name] = params[name] - ratio * lr * update
    return params


@pytest.mark.parametrize("adapt", [True, False])
def test_matches_official_update_rule(adapt):
    rng = np.random.RandomState(0)
    shapes = {"dense/kernel": (4, 3), "dense/bias": (3,), "layer_norm/gamma": (3,)}
    init = {k: rng.randn(*s).astype(np.float32) for k, s in shapes.items()}
    steps = [{k: rng.randn(*s).astype(np.float32) for k, s in shapes.items()} for _ in range(5)]
    variables = {}
    for name, value in init.items():
        layer, vname = name.split("/")
        variables[name] = keras.Variable(value, name=vname)
        variables[name]._path = name  # the path the exclusion rule reads
    optimizer = AlbertOptimizer(learning_rate=0.01, layer_adaptation=adapt)
    for grads in steps:
        optimizer.apply([grads[k] for k in variables], list(variables.values()))
    expected = official_lamb(
        init, steps, lr=0.01, adapt=adapt, excluded=("dense/bias", "layer_norm/gamma")
    )
    for name, variable in variables.items():
        np.testing.assert_allclose(np.asarray(variable), expected[name], rtol=1e-5, atol=1e-6)
    # The kernel really moved, and by something else than plain Adam would.
    assert np.abs(np.asarray(variables["dense/kernel"]) - init["dense/kernel"]).max() > 1e-3


def test_schedule_warmup_then_linear_decay():
    schedule = WarmupPolynomialDecay(2.0, total_steps=1000, warmup_steps=100)
    values = [float(schedule(s)) for s in (0, 50, 99, 100, 550, 1000, 2000)]
    # Independent arithmetic: 2·s/100 during warm-up, 2·(1 - s/1000) after.
    expected = [0.0, 1.0, 1.98, 1.8, 0.9, 0.0, 0.0]
    np.testing.assert_allclose(values, expected, atol=1e-6)
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupPolynomialDecay(1.0, total_steps=10, warmup_steps=20)
