"""The learning curve: TensorBoard scalars and ``MODEL_DIR/metrics.jsonl``.

Only the chief writes files; other workers get no-op summary writers, so the
same calls work on every worker of a multi-worker run.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf import storage

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    """Writes each split's scalars to ``logs/<split>`` and ``metrics.jsonl``.

    Args:
        model_dir: the run's directory.
        chief: whether this worker writes (the others only go through the motions).
    """

    def __init__(self, model_dir: str, chief: bool = True):
        self.model_dir = model_dir
        self.chief = chief
        self._writers: dict[str, tf.summary.SummaryWriter] = {}

    @property
    def path(self) -> str:
        return os.path.join(self.model_dir, METRICS_FILE)

    def _summary_writer(self, split: str) -> tf.summary.SummaryWriter:
        if split not in self._writers:
            if self.chief:
                path = os.path.join(self.model_dir, "logs", split)
                self._writers[split] = tf.summary.create_file_writer(path)
            else:
                self._writers[split] = tf.summary.create_noop_writer()
        return self._writers[split]

    def write(self, split: str, values: dict[str, float], step: int) -> None:
        """TensorBoard scalars, and a line of metrics.jsonl (the learning
        curve in a form any script can read)."""
        writer = self._summary_writer(split)
        with writer.as_default(step=step):
            for k, v in values.items():
                tf.summary.scalar(k, v)
        writer.flush()
        if self.chief:
            record = {"split": split, "step": step, **{k: float(v) for k, v in values.items()}}
            storage.append_text(self.path, json.dumps(record) + "\n")

    def truncate(self, step: int) -> None:
        """Drops metrics.jsonl lines past ``step``: a resumed run redoes those
        steps, and the learning curve should hold each step once."""
        path = self.path
        if not (self.chief and storage.exists(path)):
            return
        lines = storage.read_text(path).splitlines(keepends=True)
        kept = []
        for line in lines:
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line)
            except (ValueError, KeyError):
                pass  # a line cut short when the run was killed
        if len(kept) != len(lines):
            storage.write_bytes(path, "".join(kept).encode("utf-8"))
