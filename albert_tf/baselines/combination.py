"""A multiple-choice model's score combined with the options' overlap: two weights
fitted on dev items, so that the lexical clue a small model misses and the model's
reading of the options add up (``logits = model_weight · model + overlap_weight ·
overlap``, softmax over the options).

The weights maximise the dev items' conditional log-likelihood (a conditional logit
with two features) with a small L2 penalty, by Newton's method with step halving:
the problem is concave, and two parameters need no more.
"""

from __future__ import annotations

import numpy as np

#: L2 penalty per item: keeps the weights finite when dev is separable.
L2 = 1e-3
#: Newton steps; each solves a 2×2 system.
MAX_STEPS = 50


def fit_combination(
    model_logits: np.ndarray, overlap: np.ndarray, labels: np.ndarray, present=None
) -> dict[str, float]:
    """Weights of the model's logits and the overlap that fit ``labels`` best.

    Args:
        model_logits, overlap: float [items, options].
        labels: int [items], the right option.
        present: bool [items, options], False for padding options (default: all).

    Returns:
        ``{"model_weight": a, "overlap_weight": b}``.

    >>> logits = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 0.5], [1.0, 0.0]])
    >>> overlap = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    >>> w = fit_combination(logits, overlap, np.array([0, 1, 0, 0]))
    >>> w["model_weight"] > 0 and w["overlap_weight"] > 0
    True
    """
    features = np.stack([model_logits, overlap], -1).astype(np.float64)  # [N, C, 2]
    if features.ndim != 3 or features.shape[0] == 0:
        raise ValueError(
            f"need [items, options] scores of at least one item, got {features.shape[:-1]}"
        )
    labels = np.asarray(labels)
    n, c = features.shape[:2]
    if labels.shape != (n,) or not ((labels >= 0) & (labels < c)).all():
        raise ValueError(f"labels must be {n} option indices in [0, {c})")
    present = np.ones((n, c), bool) if present is None else np.asarray(present, bool)
    if not present[np.arange(n), labels].all():
        raise ValueError("a label points at an absent option")
    features = np.where(present[..., None], features, 0.0)
    chosen = features[np.arange(n), labels]  # [N, 2]

    def objective(weights: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """The penalised log-likelihood, its gradient and its Hessian."""
        scores = np.where(present, features @ weights, -np.inf)
        top = scores.max(1, keepdims=True)
        p = np.exp(scores - top)
        total = p.sum(1, keepdims=True)
        p /= total
        value = (chosen @ weights - (top + np.log(total))[:, 0]).sum()
        value -= 0.5 * L2 * n * weights @ weights
        mean = np.einsum("nc,ncf->nf", p, features)
        gradient = (chosen - mean).sum(0) - L2 * n * weights
        centred = features - mean[:, None]
        hessian = -np.einsum("nc,ncf,ncg->fg", p, centred, centred) - L2 * n * np.eye(2)
        return value, gradient, hessian

    weights = np.zeros(2)
    value, gradient, hessian = objective(weights)
    for _ in range(MAX_STEPS):
        step = np.linalg.solve(hessian, gradient)  # the Hessian is negative definite
        size = 1.0
        while True:  # halve a step that does not raise the likelihood (far from the top)
            candidate = weights - size * step
            new = objective(candidate)
            if new[0] >= value or size < 1e-8:
                break
            size /= 2
        weights, (value, gradient, hessian) = candidate, new
        if np.abs(size * step).max() < 1e-10:
            break
    else:
        raise RuntimeError(f"fit_combination did not converge in {MAX_STEPS} Newton steps")
    if not np.isfinite(weights).all():
        raise RuntimeError(f"fit_combination found no finite weights: {weights}")
    return {"model_weight": float(weights[0]), "overlap_weight": float(weights[1])}
