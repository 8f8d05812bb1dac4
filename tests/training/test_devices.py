"""Defaults that follow the hardware: strategy, precision, XLA and collectives, each
checked with TensorFlow's device list faked (no project machine has a GPU or TPU)."""

import dataclasses
import json

import pytest
import tensorflow as tf
from helpers.training_utils import tiny_albert, tiny_options

from albert_tf.layers.implementations import model_implementation
from albert_tf.training import devices as devices_module
from albert_tf.training.devices import (
    Devices,
    auto_jit_compile,
    auto_precision,
    auto_strategy,
    cluster_workers,
    missing_gpu_warning,
)
from albert_tf.training.pretraining.run_record import RUN_FILE, check_compatible, run_record
from albert_tf.training.pretraining.trainer import PretrainingTrainer
from albert_tf.training.strategies import collective_implementation, create_strategy

A100, H100, V100, T4 = (8, 0), (9, 0), (7, 0), (7, 5)
AVX2 = frozenset({"avx2", "fma"})


def _fake_gpus(monkeypatch, capabilities):
    """TensorFlow's physical device list and details, as a GPU machine reports them."""
    real = tf.config.list_physical_devices
    gpus = [
        tf.config.PhysicalDevice(name=f"/physical_device:GPU:{i}", device_type="GPU")
        for i in range(len(capabilities))
    ]
    details = {
        gpu.name: {"compute_capability": c} if c else {}
        for gpu, c in zip(gpus, capabilities, strict=True)
    }
    monkeypatch.setattr(
        tf.config, "list_physical_devices", lambda kind=None: gpus if kind == "GPU" else real(kind)
    )
    monkeypatch.setattr(
        tf.config.experimental, "get_device_details", lambda device: details[device.name]
    )


@pytest.mark.parametrize(
    "found,tpu_address,expected",
    [
        # (strategy, precision, XLA) — what the card's hardware supports.
        (Devices(gpus=(A100,) * 8, cpu_flags=AVX2), None, ("mirrored", "bfloat16", True)),
        (Devices(gpus=(H100,), cpu_flags=AVX2), None, ("default", "bfloat16", True)),
        (Devices(gpus=(V100,) * 4, cpu_flags=AVX2), None, ("mirrored", "float16", True)),
        (Devices(gpus=(T4,), cpu_flags=AVX2), None, ("default", "float16", True)),
        # One older card among newer ones: float16 (bfloat16 is not native on all).
        (Devices(gpus=(A100, T4), cpu_flags=AVX2), None, ("mirrored", "float16", True)),
        (Devices(gpus=(None,), cpu_flags=AVX2), None, ("default", "float16", True)),
        (Devices(tpu=True, cpu_flags=AVX2), "local", ("tpu", "bfloat16", True)),
        # A TPU VM launched without --tpu: its TPU, not its CPU.
        (Devices(tpu=True, cpu_flags=AVX2), None, ("tpu", "bfloat16", True)),
        (Devices(cpu_flags=AVX2), None, ("default", "float32", False)),
        (Devices(cpu_flags=AVX2 | {"avx512_bf16"}), None, ("default", "bfloat16", False)),
    ],
)
def test_auto_choices_follow_the_devices(found, tpu_address, expected):
    assert (auto_strategy(found, tpu_address), auto_precision(found), auto_jit_compile(found)) == (
        expected
    )


CHIEF_AND_WORKER = {
    "cluster": {"chief": ["h0:2222"], "worker": ["h1:2222"]},
    "task": {"type": "chief", "index": 0},
}


@pytest.mark.parametrize(
    "tf_config,found,expected",
    [
        (None, Devices(), "default"),
        (
            {"cluster": {"worker": ["h0:2222"]}, "task": {"type": "worker", "index": 0}},
            Devices(),
            "default",
        ),
        (CHIEF_AND_WORKER, Devices(), "multi_worker_mirrored"),
        (CHIEF_AND_WORKER, Devices(gpus=(A100,) * 8), "multi_worker_mirrored"),
        # An evaluator only watches: one training task.
        ({"cluster": {"worker": ["h0:1"], "evaluator": ["h1:1"]}}, Devices(), "default"),
        # Multi-worker mirrored cannot drive a TPU.
        (CHIEF_AND_WORKER, Devices(tpu=True), "tpu"),
    ],
)
def test_auto_strategy_follows_tf_config(tf_config, found, expected):
    workers = cluster_workers(json.dumps(tf_config) if tf_config else None)
    assert auto_strategy(found, workers=workers) == expected


def test_auto_reads_tf_config_and_makes_one_multi_worker_job(monkeypatch):
    # The strategy itself is built in real worker processes
    # (tests/training/pretraining/test_faults.py); here only what is asked for.
    built = []
    monkeypatch.setattr(
        tf.distribute,
        "MultiWorkerMirroredStrategy",
        lambda communication_options: built.append(communication_options) or "mwms",
    )
    monkeypatch.setenv("TF_CONFIG", json.dumps(CHIEF_AND_WORKER))
    assert create_strategy("auto", devices=Devices()) == "mwms"
    assert built[0].timeout_seconds == 600.0


def test_auto_on_a_tpu_vm_connects_to_the_local_tpu(monkeypatch):
    addresses = []

    class Stop(Exception):
        pass

    def resolver(tpu):
        addresses.append(tpu)
        raise Stop

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(Stop):
        create_strategy("auto", devices=Devices(tpu=True))
    with pytest.raises(Stop):
        create_strategy("auto", "my-tpu", devices=Devices())
    assert addresses == ["local", "my-tpu"]


def test_auto_precision_on_older_gpus_trains_float16_with_loss_scaling(
    monkeypatch, tmp_path, prepared, vocab
):
    # The paper's flagfiles say --precision=auto: on a V100 or T4 (no bfloat16)
    # that is float16, whose optimizer must scale the loss.
    import keras

    volta = Devices(gpus=(V100,), cpu_flags=AVX2)
    monkeypatch.setattr(devices_module.Devices, "detect", classmethod(lambda cls, s=None: volta))
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(tmp_path / "run", prepared, precision="auto", jit_compile=False),
    )
    assert trainer.options.precision == "float16"
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    assert trainer.model.backbone.dtype_policy.name == "mixed_float16"


def test_devices_are_read_from_tensorflows_device_list(monkeypatch):
    _fake_gpus(monkeypatch, [(8, 6), (8, 6), None])
    found = Devices.detect()
    assert found.gpus == ((8, 6), (8, 6), None)
    assert found.describe() == "3 GPU(s), compute capability 8.6"
    assert not found.tpu


def test_auto_strategy_mirrors_over_the_gpus_it_finds():
    # The strategy is built for real; on this CPU machine it mirrors over the CPU
    # (the GPUs are only told to create_strategy, which cannot place ops on them).
    chosen = create_strategy("auto", devices=Devices(gpus=(A100, A100)))
    assert isinstance(chosen, tf.distribute.MirroredStrategy)
    assert create_strategy("auto", devices=Devices()) is tf.distribute.get_strategy()


def test_multi_worker_gpu_runs_ask_for_nccl():
    implementation = tf.distribute.experimental.CommunicationImplementation
    assert collective_implementation(Devices(gpus=(V100,))) == implementation.NCCL
    assert collective_implementation(Devices()) == implementation.AUTO


def test_a_gpu_machine_whose_gpu_tensorflow_missed_is_told():
    assert "trains on the CPU" in missing_gpu_warning(Devices(), nvidia_present=True)
    assert missing_gpu_warning(Devices(), nvidia_present=False) is None


def test_the_trainer_takes_the_defaults_of_the_devices_and_says_so(
    monkeypatch, tmp_path, prepared, vocab
):
    ampere = Devices(gpus=(A100, A100), cpu_flags=AVX2)
    monkeypatch.setattr(devices_module.Devices, "detect", classmethod(lambda cls, s=None: ampere))
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(tmp_path / "run", prepared, precision="auto", jit_compile=None),
    )
    assert (trainer.options.precision, trainer.options.jit_compile) == ("bfloat16", True)
    assert trainer.model.backbone.dtype_policy.name == "mixed_bfloat16"
    assert trainer.describe() == (
        "devices: 2 GPU(s), compute capability 8.0; strategy _DefaultDistributionStrategy "
        "with 1 replica(s); precision bfloat16; XLA on; layers xla"
    )
    assert model_implementation(trainer.model) == trainer.implementation == "xla"


def test_fine_tuning_on_a_faked_gpu_gives_the_model_stock_ops(
    monkeypatch, tmp_path, prepared, vocab
):
    # The CPU kernels are no choice on a GPU machine; exports aside, the model
    # holds what its trainer chose.
    from albert_tf.tasks.classification.model import AlbertTextClassifier
    from albert_tf.tasks.classification.trainer import ClassificationTrainer
    from albert_tf.tokenizers import load_tokenizer

    model = AlbertTextClassifier.from_albert_config(tiny_albert(vocab), num_labels=2)
    ampere = Devices(gpus=(A100,), cpu_flags=AVX2)
    monkeypatch.setattr(devices_module.Devices, "detect", classmethod(lambda cls, s=None: ampere))
    trainer = ClassificationTrainer(
        model,
        load_tokenizer(prepared.tokenizer_dir),
        output_dir=tmp_path,
        label_names=["a", "b"],
        max_seq_length=32,
    )
    assert trainer.implementation == model_implementation(model) == "stock"


def test_xla_may_be_switched_when_resuming(tmp_path, prepared, vocab):
    config = tiny_albert(vocab)
    options = tiny_options(tmp_path / "run", prepared, jit_compile=False)
    PretrainingTrainer(config, options)
    # The record leaves XLA out: a run started without it resumes with it...
    check_compatible(
        options.model_dir, run_record(config, dataclasses.replace(options, jit_compile=True))
    )
    # ...and so does a run recorded before XLA became switchable.
    path = tmp_path / "run" / RUN_FILE
    record = json.loads(path.read_text())
    record["options"]["jit_compile"] = False
    path.write_text(json.dumps(record))
    check_compatible(
        options.model_dir, run_record(config, dataclasses.replace(options, jit_compile=True))
    )
    with pytest.raises(ValueError, match="options.seed"):
        check_compatible(
            options.model_dir, run_record(config, dataclasses.replace(options, seed=1))
        )
