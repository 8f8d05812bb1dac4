"""The files a pretraining run keeps beside its checkpoints: the run record
(which model and recipe a directory belongs to) and the metrics log."""

import dataclasses
import json

import pytest
from helpers.testing_utils import tiny_config

from albert_tf.training.metrics_log import METRICS_FILE, MetricsLog
from albert_tf.training.pretraining.options import PretrainingOptions
from albert_tf.training.pretraining.run_record import (
    OPTIONAL_OPTIONS,
    RESUMABLE_OPTIONS,
    RUN_FILE,
    check_compatible,
    read_run_record,
    record_diff,
    run_record,
    write_run_record,
)

CONFIG = tiny_config(
    vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
)


def test_record_diff_names_nested_and_missing_keys():
    a = {"albert_config": {"hidden_size": 32, "vocab_size": 9}, "options": {"seed": 1}}
    b = {"albert_config": {"hidden_size": 64, "vocab_size": 9}, "options": {}}
    assert record_diff(a, b) == ["albert_config.hidden_size: 32 -> 64", "options.seed: 1 -> None"]
    assert record_diff(a, a) == []


def test_run_record_leaves_out_exactly_the_resumable_options(tmp_path):
    options = PretrainingOptions(str(tmp_path), "train-*")
    record = run_record(CONFIG, options)
    every = {f.name for f in dataclasses.fields(PretrainingOptions)}
    # Options left unset that older records lack are left out too.
    assert set(record["options"]) == every - set(RESUMABLE_OPTIONS) - set(OPTIONAL_OPTIONS)
    assert record["options"]["seed"] == 12345
    budget = run_record(CONFIG, dataclasses.replace(options, tokens_per_batch=8192))
    assert budget["options"]["tokens_per_batch"] == 8192
    assert record["albert_config"]["hidden_size"] == 16


def test_resuming_may_change_the_schedule_but_not_the_recipe(tmp_path):
    model_dir = str(tmp_path / "run")
    assert read_run_record(model_dir) == {}
    options = PretrainingOptions(model_dir, "train-*", num_train_steps=10)
    write_run_record(model_dir, run_record(CONFIG, options))
    on_disk = json.loads((tmp_path / "run" / RUN_FILE).read_text())
    assert on_disk == read_run_record(model_dir) == run_record(CONFIG, options)

    longer = dataclasses.replace(options, num_train_steps=20, train_files="other-*")
    check_compatible(model_dir, run_record(CONFIG, longer))  # no error
    reseeded = dataclasses.replace(options, seed=7)
    with pytest.raises(ValueError, match=r"options\.seed: 12345 -> 7"):
        check_compatible(model_dir, run_record(CONFIG, reseeded))
    # The first run's record stays: a second write does not replace it.
    write_run_record(model_dir, run_record(CONFIG, reseeded))
    assert read_run_record(model_dir)["options"]["seed"] == 12345


def test_metrics_log_appends_lines_and_truncates_past_a_step(tmp_path):
    log = MetricsLog(str(tmp_path))
    for step in (1, 2, 3):
        log.write("train", {"mlm_loss": float(step)}, step)
    with open(tmp_path / METRICS_FILE, "a") as f:
        f.write('{"split": "train", "st')  # a run killed mid-line
    log.truncate(2)
    lines = [json.loads(x) for x in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert lines == [
        {"split": "train", "step": 1, "mlm_loss": 1.0},
        {"split": "train", "step": 2, "mlm_loss": 2.0},
    ]
    assert (tmp_path / "logs" / "train").is_dir()  # TensorBoard events beside it


def test_a_non_chief_metrics_log_writes_nothing(tmp_path):
    log = MetricsLog(str(tmp_path), chief=False)
    log.write("eval", {"mlm_loss": 1.0}, 5)
    log.truncate(0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("root", ["ram://albert_tf_run_files", "file://{tmp}"])
def test_the_run_record_lives_behind_a_url(tmp_path, root, monkeypatch):
    # A gs:// model_dir: the record is read and written there, and nothing lands in a
    # local folder named after the scheme.
    monkeypatch.chdir(tmp_path)
    model_dir = root.format(tmp=tmp_path / "remote") + "/run"
    options = PretrainingOptions(model_dir, "train-*", num_train_steps=10)
    write_run_record(model_dir, run_record(CONFIG, options))
    assert read_run_record(model_dir) == run_record(CONFIG, options)
    with pytest.raises(ValueError, match=r"options\.seed"):
        check_compatible(model_dir, run_record(CONFIG, dataclasses.replace(options, seed=7)))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(":")]
