"""Figures on matplotlib's Agg canvas: no pyplot state, no display needed."""

from __future__ import annotations

import os

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def new_figure(rows: int, cols: int, *, width: float, height: float) -> tuple[Figure, list]:
    """A figure with a grid of axes (flattened, row by row) on an Agg canvas."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, cols, squeeze=False).ravel().tolist()
    return figure, axes


def save_figure(figure: Figure, path: str | os.PathLike[str], dpi: int = 110) -> None:
    """Writes ``figure`` as a PNG, creating the parent folder."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    # "tight" grows the canvas to what is drawn: a figure legend of long run names
    # would otherwise be cut at the edges.
    figure.savefig(path, dpi=dpi, format="png", bbox_inches="tight")
