"""Figures on matplotlib's Agg canvas: no pyplot state, no display needed."""

from __future__ import annotations

import io
import os

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from albert_tf import storage


def new_figure(rows: int, cols: int, *, width: float, height: float) -> tuple[Figure, list]:
    """A figure with a grid of axes (flattened, row by row) on an Agg canvas."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, cols, squeeze=False).ravel().tolist()
    return figure, axes


def save_figure(figure: Figure, path: str | os.PathLike[str], dpi: int = 110) -> None:
    """Writes ``figure`` as a PNG (a local path or a bucket URL), creating the parent
    folder."""
    path = os.fspath(path)
    storage.make_parent(path)
    # matplotlib writes local files only: the PNG is drawn in memory, then stored.
    png = io.BytesIO()
    # "tight" grows the canvas to what is drawn: a figure legend of long run names
    # would otherwise be cut at the edges.
    figure.savefig(png, dpi=dpi, format="png", bbox_inches="tight")
    storage.write_bytes(path, png.getvalue())
