"""--precision=auto: bfloat16 where it is native, float32 elsewhere."""

import json
import subprocess
import sys

import pytest
from helpers.training_utils import tiny_albert, tiny_options

from albert_tf.hardware import cpu_flags
from albert_tf.training.precision import resolve_precision
from albert_tf.training.pretraining.trainer import PretrainingTrainer


def test_kernel_build_does_not_import_the_training_layer():
    # kernels/ sits below training/: building the kernels (which keys its
    # cache by CPU features) must not pull in the trainers.
    code = (
        "import sys; from albert_tf.kernels.build import library_path; library_path(); "
        "print(sorted(m for m in sys.modules if m.startswith('albert_tf.training')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_cpu_flags_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16\n\nflags : x\n")
    assert cpu_flags(str(info)) == {"fpu", "sse2", "avx512f", "avx512_bf16"}
    assert cpu_flags(str(tmp_path / "missing")) == set()


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({"avx512_bf16"}, "bfloat16"),  # AMD Zen 4+, Intel Cooper Lake
        ({"amx_bf16", "amx_tile"}, "bfloat16"),  # Intel Sapphire Rapids+
        ({"avx2"}, "float32"),  # AMD Zen 1-3
        # Intel Cascade Lake / Ice Lake: AVX-512 and int8 dot products, no bfloat16
        ({"avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"}, "float32"),
    ],
)
def test_auto_follows_cpu_features(flags, expected):
    assert resolve_precision("auto", flags=flags) == expected
    assert resolve_precision("float32", flags=flags) == "float32"


def test_trainer_resolves_auto_and_resumes_in_the_recorded_precision(tmp_path, prepared, vocab):
    model_dir = tmp_path / "run"
    trainer = PretrainingTrainer(
        tiny_albert(vocab), tiny_options(model_dir, prepared, precision="auto", num_train_steps=1)
    )
    assert trainer.options.precision == resolve_precision("auto")
    assert trainer.model.backbone.dtype_policy.compute_dtype == trainer.options.precision
    record = json.loads((model_dir / "pretraining_run.json").read_text())
    assert record["options"]["precision"] == trainer.options.precision  # never "auto"

    # Pretend the run started on a machine where auto meant the other one.
    other = "float32" if trainer.options.precision == "bfloat16" else "bfloat16"
    record["options"]["precision"] = other
    (model_dir / "pretraining_run.json").write_text(json.dumps(record))
    resumed = PretrainingTrainer(
        tiny_albert(vocab), tiny_options(model_dir, prepared, precision="auto", num_train_steps=1)
    )
    assert resumed.options.precision == other
