"""A tf.Module wrapping `tokenize` survives SavedModel export and is served
by a fresh process that imports only tensorflow and tensorflow_text."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
from helpers.tokenizer_export import SERVE_TOKENIZE, TokenizeExport

from albert_tf.tokenizers import load_tokenizer

TEXTS = ["Café naïve résumé, 1,000,000 and 9,5", "我爱ALBERT模型2024年 😀", "", "\tTabs\nand CAPS"]


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_savedmodel_serves_same_ids_in_fresh_process(kind, sp_dir, wp_dir, tmp_path):
    # Load from a private copy, then delete it: the SavedModel must carry
    # its own model proto / vocab asset.
    source = tmp_path / "tokenizer"
    shutil.copytree(sp_dir if kind == "sentencepiece" else wp_dir, source)
    tokenizer = load_tokenizer(source)
    expected = tokenizer.tokenize(tf.constant(TEXTS)).to_list()
    offsets = [t.to_list() for t in tokenizer.tokenize_with_offsets(tf.constant(TEXTS))]
    export_dir = tmp_path / "saved"
    tf.saved_model.save(TokenizeExport(tokenizer), str(export_dir))
    shutil.rmtree(source)
    if kind == "wordpiece":
        assert (export_dir / "assets" / "vocab.txt").is_file()

    result = subprocess.run(
        [sys.executable, "-c", SERVE_TOKENIZE, str(export_dir), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(export_dir).parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served == expected
    assert any(len(row) > 3 for row in served)

    result = subprocess.run(
        [sys.executable, "-c", SERVE_TOKENIZE, str(export_dir), json.dumps(TEXTS), "offsets"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(export_dir).parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == offsets
    assert offsets[0] == expected


def test_savedmodel_graph_has_no_py_function(sp_tokenizer, wp_tokenizer):
    for tokenizer in (sp_tokenizer, wp_tokenizer):
        export = TokenizeExport(tokenizer)
        for function in (export.tokenize, export.tokenize_with_offsets):
            graph = function.get_concrete_function().graph
            ops = {op.type for op in graph.get_operations()}
            assert not ops & {"EagerPyFunc", "PyFunc", "PyFuncStateless"}
