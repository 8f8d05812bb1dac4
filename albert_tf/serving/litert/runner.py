"""Running an exported ``.tflite`` file: its custom ops and `LiteRTMultipleChoice`."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np


def custom_op_names(path: str | os.PathLike[str]) -> list[str]:
    """The custom (non-builtin) op names a ``.tflite`` file uses, sorted.

    Flex ops show up here as ``Flex...``; this export has only ``TFText>...``.

    >>> custom_op_names("albert_mc.tflite")  # doctest: +SKIP
    ['TFText>ByteSplit', 'TFText>ByteSplitByOffsets', 'TFText>FastSentencepieceTokenize', ...]
    """
    from tensorflow.lite.python import schema_py_generated as schema

    from albert_tf import storage

    model = schema.ModelT.InitFromPackedBuf(storage.read_bytes(path), 0)
    names = set()
    for code in model.operatorCodes:
        if code.customCode:
            names.add(
                code.customCode.decode() if isinstance(code.customCode, bytes) else code.customCode
            )
    return sorted(names)


class LiteRTMultipleChoice:
    """Runs an `export_litert` file with the TF Lite interpreter (XNNPACK on).

    Args:
        path: the ``.tflite`` file (a local path or a bucket URL, read into memory).
        num_threads: interpreter (and XNNPACK) threads.

    Example:
        >>> runner = LiteRTMultipleChoice("albert_mc.tflite", num_threads=2)  # doctest: +SKIP
        >>> runner.predict("It rains.", "Take _.", ["an umbrella", "ice cream"])
        ... # doctest: +SKIP
        array([0.83, 0.17], dtype=float32)
    """

    def __init__(self, path: str | os.PathLike[str], num_threads: int = 2) -> None:
        import tensorflow_text as tf_text
        from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

        from albert_tf import storage

        self.path = os.fspath(path)
        self.num_threads = num_threads
        # The interpreter opens local files only: a bucket's file is read into memory.
        source = (
            {"model_content": storage.read_bytes(self.path)}
            if storage.is_remote(self.path)
            else {"model_path": self.path}
        )
        self.interpreter = InterpreterWithCustomOps(
            **source,
            num_threads=num_threads,
            custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
        )
        self._serve = self.interpreter.get_signature_runner("serving_default")
        self.max_options = int(self._serve.get_input_details()["options"]["shape"][0])
        self._tokenize = self.interpreter.get_signature_runner("tokenize")

    def _inputs(self, context: str, question: str, options: Sequence[str]) -> dict:
        if not any(options):
            raise ValueError("need at least one non-empty option (empty means absent)")
        if len(options) > self.max_options:
            raise ValueError(
                f"{len(options)} options, but this model takes at most {self.max_options} "
                "(export_litert(..., max_options=N))"
            )
        padded = list(options) + [""] * (self.max_options - len(options))
        return {
            "context": np.array([context.encode()], dtype=object),
            "question": np.array([question.encode()], dtype=object),
            "options": np.array([o.encode() for o in padded], dtype=object),
        }

    def tokenize(self, context: str, question: str, options: Sequence[str]) -> dict:
        """The packed ``token_ids`` / ``segment_ids`` / ``padding_mask``, int32 [1, C, S]
        (C = ``len(options)``, S = the export's ``max_seq_length``)."""
        out = self._tokenize(**self._inputs(context, question, options))
        return {k: v[:, : len(options)] for k, v in out.items()}

    def predict(self, context: str, question: str, options: Sequence[str]) -> np.ndarray:
        """float32 [C] probabilities (0 for empty options)."""
        out = self._serve(**self._inputs(context, question, options))
        return out["probabilities"][0, : len(options)]
