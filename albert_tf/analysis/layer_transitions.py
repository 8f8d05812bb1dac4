"""How much each applied layer changes its input: the ALBERT paper's Figure 1.

For every applied transformer layer (L of them; a shared layer applied four times
counts four times), the L2 distance and the cosine similarity between the layer's
input and output hidden state of each real token, averaged over the non-padding
tokens of held-out text. Layer 1's input is the projected embedding. The paper
(Lan et al. 2020, §3.1) finds ALBERT-large's transitions smoother than BERT-large's,
oscillating rather than converging to 0; it plots the cosine as an angle, which
`LayerTransitions.angle_degrees` holds too.

>>> import numpy as np
>>> x = np.array([[[3.0, 4.0]]]); y = np.array([[[0.0, 5.0]]])
>>> sums = transition_sums([x, y], np.ones((1, 1)))
>>> float(sums.l2[0]), float(sums.cosine[0]), sums.tokens
(3.1622776601683795, 0.8, 1)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from albert_tf import storage
from albert_tf.analysis.plotting import new_figure, save_figure
from albert_tf.checkpoints.saved_format import load
from albert_tf.data.corpus import Document, read_corpus
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.tokenizers import Tokenizer, load_tokenizer


@dataclasses.dataclass
class TransitionSums:
    """Per-layer sums over tokens, so batches add up before the mean is taken."""

    l2: np.ndarray
    cosine: np.ndarray
    angle: np.ndarray
    tokens: int

    def __add__(self, other: TransitionSums) -> TransitionSums:
        return TransitionSums(
            self.l2 + other.l2,
            self.cosine + other.cosine,
            self.angle + other.angle,
            self.tokens + other.tokens,
        )


@dataclasses.dataclass(frozen=True)
class LayerTransitions:
    """One model's per-layer means (index 0 is the first applied layer)."""

    label: str
    share: str
    l2_distance: list[float]
    cosine_similarity: list[float]
    angle_degrees: list[float]
    tokens: int
    sequences: int
    model_dir: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def transition_sums(hidden_states: Sequence[Any], padding_mask: Any) -> TransitionSums:
    """Sums of input→output L2 distance, cosine and angle over the real tokens.

    Args:
        hidden_states: L + 1 arrays [batch, seq, H]: a stack's input, then each
            applied layer's output (`AlbertBackbone` ``hidden_states``).
        padding_mask: [batch, seq], nonzero for real tokens.
    """
    mask = np.asarray(padding_mask) != 0
    # float64: sums over many tokens, and cosines near 1 lose digits in float32.
    states = [np.asarray(h, np.float64)[mask] for h in hidden_states]
    l2, cosine, angle = [], [], []
    for x, y in zip(states[:-1], states[1:], strict=True):
        l2.append(np.linalg.norm(y - x, axis=-1).sum())
        norms = np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1)
        cos = np.clip(np.sum(x * y, axis=-1) / np.maximum(norms, 1e-30), -1.0, 1.0)
        cosine.append(cos.sum())
        angle.append(np.degrees(np.arccos(cos)).sum())
    return TransitionSums(np.array(l2), np.array(cosine), np.array(angle), int(mask.sum()))


def with_hidden_states(backbone: AlbertBackbone) -> AlbertBackbone:
    """``backbone`` itself if it outputs every layer, else a copy that does.

    The copy is built from the same config with ``output_hidden_states=True``
    and given the same weights; its other outputs are unchanged.
    """
    if backbone.output_hidden_states:
        return backbone
    copy = AlbertBackbone.from_config({**backbone.get_config(), "output_hidden_states": True})
    copy.set_weights(backbone.get_weights())
    return copy


def encode_documents(
    tokenizer: Tokenizer,
    documents: Iterable[Document],
    *,
    max_seq_length: int,
    max_sequences: int,
) -> dict[str, np.ndarray]:
    """Held-out text as single-segment backbone inputs ``[CLS] pieces [SEP]``.

    Each document's pieces are cut into runs of ``max_seq_length - 2``; a
    document's last run is shorter and padded. Stops at ``max_sequences``.

    Raises:
        ValueError: the documents hold no pieces.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, not {max_seq_length}")
    body = max_seq_length - 2
    rows: list[list[int]] = []
    for document in documents:
        pieces = tokenizer.tokenize_on_host(document)[0].tolist()
        for start in range(0, len(pieces), body):
            if len(rows) == max_sequences:
                break
            rows.append([tokenizer.cls_id, *pieces[start : start + body], tokenizer.sep_id])
        if len(rows) == max_sequences:
            break
    if not rows:
        raise ValueError("the corpus holds no text to analyse")
    token_ids = np.full((len(rows), max_seq_length), tokenizer.pad_id, np.int32)
    padding_mask = np.zeros((len(rows), max_seq_length), np.int32)
    for i, row in enumerate(rows):
        token_ids[i, : len(row)] = row
        padding_mask[i, : len(row)] = 1
    return {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": padding_mask,
    }


def measure(
    backbone: AlbertBackbone, inputs: dict[str, np.ndarray], *, batch_size: int = 32
) -> TransitionSums:
    """`transition_sums` of ``backbone`` (inference mode) over ``inputs``, batched."""
    model = with_hidden_states(backbone)
    total: TransitionSums | None = None
    count = len(inputs["token_ids"])
    for start in range(0, count, batch_size):
        batch = {k: v[start : start + batch_size] for k, v in inputs.items()}
        states = model(batch, training=False)["hidden_states"]
        sums = transition_sums([s.numpy() for s in states], batch["padding_mask"])
        total = sums if total is None else total + sums
    if total is None:
        raise ValueError("no sequences to measure")
    return total


def model_label(model_dir: str | os.PathLike[str]) -> str:
    """A run's name for a legend: the folder, or its parent for ``RUN/final``."""
    path = os.path.normpath(os.fspath(model_dir))
    name = os.path.basename(path)
    if name == "final":
        name = os.path.basename(os.path.dirname(path)) or name
    return name


def analyze_model(
    model_dir: str | os.PathLike[str],
    corpus: str | Sequence[str],
    *,
    max_seq_length: int = 128,
    max_sequences: int = 256,
    batch_size: int = 32,
    label: str | None = None,
) -> LayerTransitions:
    """Layer transitions of a saved model (with its ``tokenizer/``) on ``corpus``.

    Args:
        model_dir: a directory `albert_tf.save_model` wrote, e.g. a run's ``final/``.
        corpus: held-out text, named as `albert_tf.data.inputs.resolve_inputs` accepts
            (a pretraining run holds its out in ``MODEL_DIR/data/eval_corpus.jsonl``).
        max_seq_length, max_sequences: the sequences `encode_documents` makes.
        batch_size: sequences per forward pass.
        label: the name in tables and legends; default `model_label`.
    """
    model_dir = os.fspath(model_dir)
    tokenizer_dir = os.path.join(model_dir, "tokenizer")
    if not storage.isdir(tokenizer_dir):
        raise FileNotFoundError(
            f"{model_dir} has no tokenizer/; analyse a model saved with its tokenizer "
            "(a pretraining run's final/)"
        )
    model = load(model_dir)
    config = model.backbone.config
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"max_seq_length={max_seq_length} exceeds the model's "
            f"{config.max_position_embeddings} positions ({model_dir})"
        )
    inputs = encode_documents(
        load_tokenizer(tokenizer_dir),
        read_corpus(corpus, what="corpus"),
        max_seq_length=max_seq_length,
        max_sequences=max_sequences,
    )
    sums = measure(model.backbone, inputs, batch_size=batch_size)
    return LayerTransitions(
        label=label or model_label(model_dir),
        share=config.share,
        l2_distance=(sums.l2 / sums.tokens).tolist(),
        cosine_similarity=(sums.cosine / sums.tokens).tolist(),
        angle_degrees=(sums.angle / sums.tokens).tolist(),
        tokens=sums.tokens,
        sequences=len(inputs["token_ids"]),
        model_dir=model_dir,
    )


def plot_layer_transitions(
    results: Sequence[LayerTransitions], path: str | os.PathLike[str]
) -> None:
    """Two panels, L2 distance and cosine similarity against layer, a line per model."""
    from matplotlib.ticker import MaxNLocator

    figure, (l2_axes, cosine_axes) = new_figure(1, 2, width=10, height=4)
    for result in results:
        layers = range(1, len(result.l2_distance) + 1)
        name = f"{result.label} (share={result.share})"
        l2_axes.plot(layers, result.l2_distance, marker="o", label=name)
        cosine_axes.plot(layers, result.cosine_similarity, marker="o", label=name)
    l2_axes.set(
        title="L2 distance, layer input to output", xlabel="layer", ylabel="mean L2 distance"
    )
    cosine_axes.set(
        title="cosine similarity, layer input to output",
        xlabel="layer",
        ylabel="mean cosine similarity",
    )
    for axes in (l2_axes, cosine_axes):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
    save_figure(figure, path)
