"""Hugging Face conversion, in and out, with every folder a ``file://`` URL, as a
``gs://`` bucket would be: the commands read and write through `tf.io.gfile`
(`albert_tf.storage`), nothing lands in the working directory, and what comes
back is the model that went out."""

import json
import shutil
import subprocess

import numpy as np
import pytest
from helpers.commands import run_command
from helpers.testing_utils import TWO_LAYERS, random_batch, tiny_config

import albert_tf
from albert_tf.checkpoints.convert import convert, convert_hf, find_tokenizer
from albert_tf.checkpoints.saved_format import SETTINGS_FILE, read_weights, save_model
from albert_tf.checkpoints.torch_free_readers import read_pytorch_bin, read_safetensors
from albert_tf.tokenizers import WordPieceTokenizer

LABELS = ["负面", "中性", "正面"]


def _convert(*args: str, cwd) -> subprocess.CompletedProcess:
    return run_command("convert", *args, cwd=cwd)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A random text classifier with a WordPiece tokenizer and label names, saved locally."""
    base = tmp_path_factory.mktemp("bucket_conversion")
    chars = list(dict.fromkeys("算法组的成员们精通各种研究和落地他们主要负责大熊猫你吃饭了吗"))
    vocab_file = base / "vocab.txt"
    vocab_file.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars]) + "\n")
    tokenizer = WordPieceTokenizer(str(vocab_file))
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **TWO_LAYERS)
    model = albert_tf.AlbertTextClassifier.from_albert_config(config, num_labels=len(LABELS))
    model(random_batch(config.vocab_size))
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    save_model(model, base / "ours", tokenizer=tokenizer)
    (base / "ours" / SETTINGS_FILE).write_text(json.dumps({"label_names": LABELS}))
    return base


def test_hugging_face_folders_in_and_out_of_a_bucket(classifier, tmp_path):
    bucket = tmp_path / "bucket"
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    local = classifier / "ours"
    # The model in the bucket, as a fine-tuning run with a bucket output_dir leaves it.
    shutil.copytree(local, bucket / "ours")
    model_url = f"file://{bucket}/ours"

    out = _convert(
        "--source=albert_tf", "--target=hf", f"--input={model_url}",
        f"--output=file://{bucket}/hf", cwd=workdir,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "as AlbertForSequenceClassification" in out.stdout
    hf = bucket / "hf"
    config = json.loads((hf / "config.json").read_text())
    assert [config["id2label"][str(i)] for i in range(3)] == LABELS
    assert (hf / "vocab.txt").read_text() == (local / "tokenizer" / "vocab.txt").read_text()
    tensors = read_safetensors(hf / "model.safetensors")
    assert tensors["classifier.bias"].shape == (3,)

    back = _convert(
        "--source=hf", f"--input=file://{hf}", f"--output=file://{bucket}/back", cwd=workdir
    )
    assert back.returncode == 0, back.stderr[-3000:]
    assert "tokenizer: wordpiece" in back.stdout
    assert list(workdir.iterdir()) == []  # no local "file:" folder
    original, returned = read_weights(local), read_weights(bucket / "back")
    assert sorted(returned) == sorted(original)
    for name, array in original.items():
        np.testing.assert_array_equal(returned[name], array, err_msg=name)
    assert json.loads((bucket / "back" / SETTINGS_FILE).read_text())["label_names"] == LABELS
    assert (bucket / "back" / "tokenizer" / "vocab.txt").read_text() == (
        local / "tokenizer" / "vocab.txt"
    ).read_text()


def test_a_pytorch_bin_folder_in_a_bucket(classifier, tmp_path):
    torch = pytest.importorskip("torch")
    from albert_tf.checkpoints.hf_export import export_hf

    hf = tmp_path / "hf"
    export_hf(str(classifier / "ours"), str(hf))
    state = read_safetensors(hf / "model.safetensors")
    (hf / "model.safetensors").unlink()
    torch.save({k: torch.from_numpy(v.copy()) for k, v in state.items()}, hf / "pytorch_model.bin")
    url = f"file://{hf}"
    read = read_pytorch_bin(f"{url}/pytorch_model.bin")
    assert sorted(read) == sorted(state)
    for name, array in state.items():
        np.testing.assert_array_equal(read[name], array, err_msg=name)
    assert find_tokenizer(url).vocabulary == find_tokenizer(str(hf)).vocabulary
    _, converted = convert("hf", url, f"file://{tmp_path}/back")
    assert converted.task == "classification"
    original, returned = read_weights(classifier / "ours"), read_weights(tmp_path / "back")
    for name, array in original.items():
        np.testing.assert_array_equal(returned[name], array, err_msg=name)
    assert json.loads((tmp_path / "back" / SETTINGS_FILE).read_text())["label_names"] == LABELS


def test_missing_bucket_folders_name_the_path_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"file://.*/nowhere.*Hugging Face model folder"):
        convert_hf(f"file://{tmp_path}/nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"No model.safetensors.*save_pretrained"):
        convert_hf(f"file://{tmp_path}/empty", tiny_config())
