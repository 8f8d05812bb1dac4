"""One pretraining process for the distribution tests; writes its weights.

usage: distributed_worker.py STRATEGY OUT.npz TRAIN_FILES TOKENIZER_DIR MODEL_DIR [STEPS_PER_LOOP]
STRATEGY: default | mirrored2 (two logical CPU replicas) | multi_worker (TF_CONFIG)
"""

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

strategy_name, out, train_files, tokenizer_dir, model_dir = sys.argv[1:6]
steps_per_loop = int(sys.argv[6]) if len(sys.argv) > 6 else 1
if strategy_name == "mirrored2":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
elif strategy_name == "multi_worker":
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
else:
    strategy = tf.distribute.get_strategy()

# tests/ (the folder above this file that holds helpers/), for helpers.training_utils
TESTS = next(
    p for p in Path(__file__).resolve().parents if (p / "helpers" / "__init__.py").is_file()
)
sys.path.insert(0, str(TESTS))
from helpers.training_utils import tiny_albert  # noqa: E402

from albert_tf.tokenizers import load_tokenizer  # noqa: E402
from albert_tf.training.pretraining.options import PretrainingOptions  # noqa: E402
from albert_tf.training.pretraining.trainer import PretrainingTrainer  # noqa: E402

config = tiny_albert(load_tokenizer(tokenizer_dir).vocabulary_size)
options = PretrainingOptions(
    model_dir=model_dir,
    train_files=train_files,
    max_seq_length=32,
    train_batch_size=8,
    num_train_steps=5,
    num_warmup_steps=1,
    learning_rate=0.01,
    progress_bar=False,
    save_checkpoints_steps=1000,
    log_every_steps=1000,
    precision="float32",  # replicas vs one process is compared to float tolerance
    steps_per_loop=steps_per_loop,
)
trainer = PretrainingTrainer(config, options, strategy)
trainer.train(log=lambda *_: None)
assert trainer.step == 5, trainer.step
# How many rows of each global batch this process parses and masks.
features, _ = next(trainer.train_iterator)
np.savez(
    out,
    *[np.asarray(w) for w in trainer.model.weights],
    replicas=strategy.num_replicas_in_sync,
    rows=features["token_ids"].shape[0],
)
