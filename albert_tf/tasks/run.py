"""`run_finetuning`: one fine-tuning run, from its `FineTuningOptions` to ``summary.json``.

What the ``finetune`` command does once it has read its flags, callable from
Python: the hardware (strategy, precision, XLA), the tokenizer, the task's data
and its split, the model (from a checkpoint or random weights), the task's
trainer and its fit, the test scores of the best checkpoint, ``summary.json``
and the export. The task's own parts come from its ``task.py``
(`albert_tf.tasks.task.FineTuningTask`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys

from albert_tf.tasks import get_task
from albert_tf.tasks.task import FineTuningTask
from albert_tf.training.finetuning.options import FineTuningOptions

#: The file in ``output_dir`` that holds a run's summary.
SUMMARY_FILE = "summary.json"


def _report(task: FineTuningTask, name: str, items, skipped, label_names=None) -> None:
    for line in task.describe(name, items, skipped, label_names):
        print(line)


def _split(options: FineTuningOptions, train: list, test: list) -> tuple[list, list | None, list]:
    """Train, dev, test: without dev files a hash split of ``train`` gives dev (and
    test, when no test files were read). The split keeps each group of items (the
    questions about one context or article, the copies of one text: `item_group`)
    in one part."""
    from albert_tf.data.splits import item_group, split_examples

    if options.dev_files:
        return train, None, test
    parts = split_examples(train, list(options.split), seed=options.split_seed, group=item_group)
    names = ("train", "dev", "left out (test files given)" if test else "test")
    sizes = ", ".join(f"{len(part)} {name}" for part, name in zip(parts, names, strict=False))
    groups = collections.Counter(item_group(item) for item in train)
    several = sum(count > 1 for count in groups.values())
    print(
        f"split: {sizes}; {several} group(s) of several items (the questions about one "
        "context or article, the copies of one text) each kept whole in one part"
    )
    train, dev, *rest = parts
    return train, dev, (test or (rest[0] if rest else []))


def _warn_shared(train: list, parts: dict[str, list | None]) -> None:
    """A warning for each dev or test set read from files whose items share a group
    (context, article, text) with training items: their scores measure memory too."""
    from albert_tf.data.splits import shared_groups

    for name, items in parts.items():
        shared = shared_groups(items or [], train)
        if shared:
            kinds = " or ".join(sorted(shared))
            print(
                f"warning: {sum(shared.values())} of {len(items or [])} {name} items share "
                f"their {kinds} with training items ({dict(sorted(shared.items()))}): "
                f"the {name} scores partly measure memory"
            )


def _with_data_files(options: FineTuningOptions) -> FineTuningOptions:
    """``options`` with its data as files the task's reader reads: relative paths
    from ``data_dir``, public datasets (``tfds:...``, Hugging Face folders) converted
    once and cached (`albert_tf.data.public_datasets`)."""
    from albert_tf.data.public_datasets import dataset_files

    files = {}
    for name in ("train_files", "dev_files", "test_files"):
        paths = options.data_paths(getattr(options, name))
        files[name] = None if paths is None else tuple(dataset_files(paths))
    return dataclasses.replace(options, data_dir=None, **files)


def _planned_accumulation(trainer, train: list, devices, strategy) -> int:
    """``--gradient_accumulation_steps=auto``: the accumulation steps of the memory plan
    (`albert_tf.training.finetuning.memory.plan_finetuning`) on the accelerators found;
    1 on CPU alone, or when their memory cannot be read."""
    from albert_tf.training.memory_plan import device_budget

    budget = device_budget(devices, strategy.num_replicas_in_sync)
    if budget is None:
        return 1
    from albert_tf.training.finetuning.memory import plan_finetuning

    example = next(iter(trainer.batches(trainer.encode(train[:2]), 2, shuffle=False, seed=0)))
    platform = "TPU" if devices.tpu else "GPU" if devices.gpus else "CPU"
    plan = plan_finetuning(trainer, budget, example, platform=platform)
    print(plan.describe())
    return plan.accumulation_steps


def run_finetuning(options: FineTuningOptions) -> dict:
    """Fine-tunes ``options.task`` as ``options`` say; returns the run's summary.

    The summary (also written to ``output_dir/summary.json``) holds the trainer's
    result (``steps``, ``best_step``, ``best_dir``, the dev metric...), and with
    test data the best checkpoint's ``test`` scores and the task's extra ones.
    Progress lines go to stdout. Raises ValueError for options or data no run
    can use, before any training.

    Example:
        >>> from albert_tf import FineTuningOptions, run_finetuning
        >>> from albert_tf.tasks.multiple_choice.settings import MultipleChoiceSettings
        >>> summary = run_finetuning(FineTuningOptions(  # configs/finetune_quickstart.flags
        ...     "runs/mc_quickstart", "sample:en",
        ...     settings=MultipleChoiceSettings(max_qa_length=64),
        ...     init_config="configs/models/albert_tiny_zh.json", tokenizer_dir="runs/tokenizer_en",
        ...     max_seq_length=128, learning_rate=5e-4, num_epochs=2, eval_every=100,
        ...     patience=3))  # doctest: +SKIP
        >>> summary["best_accuracy"]  # doctest: +SKIP
    """
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.storage import write_json_atomic
    from albert_tf.tokenizers import load_tokenizer
    from albert_tf.training.devices import (
        Devices,
        auto_jit_compile,
        cluster_workers,
        missing_gpu_warning,
        setup_line,
    )
    from albert_tf.training.precision import dtype_policy, resolve_precision
    from albert_tf.training.strategies import create_strategy

    options.validate(workers=cluster_workers(os.environ.get("TF_CONFIG")))
    strategy = create_strategy(options.strategy, options.tpu)
    devices = Devices.detect(strategy)
    precision = resolve_precision(options.precision, devices=devices)
    jit_compile = auto_jit_compile(devices) if options.jit_compile is None else options.jit_compile
    dtype = dtype_policy(precision)

    keras.utils.set_random_seed(options.seed)
    task = get_task(options.task).load("task")()
    tokenizer_dir = options.tokenizer_dir or os.path.join(options.checkpoint or "", "tokenizer")
    tokenizer = load_tokenizer(tokenizer_dir)

    given, options = options, _with_data_files(options)
    data = task.read(options, lambda *args: _report(task, *args))
    _warn_shared(
        data.train,
        {
            "dev": data.dev if options.dev_files else None,
            "test": data.test if options.test_files else None,
        },
    )
    data.train, split_dev, data.test = _split(options, data.train, data.test or [])
    data.dev = data.dev if data.dev is not None else split_dev

    # The model's variables live where the strategy puts them, in the run's precision.
    with strategy.scope():
        if options.checkpoint:
            model = task.load_model(options.checkpoint, dtype, data)
        else:
            config = AlbertConfig.from_json(options.init_config)
            if config.vocab_size != tokenizer.vocabulary_size:
                print(f"vocab_size {config.vocab_size} -> {tokenizer.vocabulary_size} (tokenizer)")
                config = config.replace(vocab_size=tokenizer.vocabulary_size)
            model = task.build_model(config, dtype, data)
    print(setup_line(devices, strategy, precision, jit_compile, options.fused_kernels))
    warning = missing_gpu_warning(devices)
    if warning:
        print(warning, file=sys.stderr)
    if options.max_items:
        data.train = data.train[: options.max_items]
    _report(task, "train", data.train, data.skipped, data.label_names)
    if not data.train or not data.dev:
        raise ValueError("no training or dev items left (see the counts above)")
    languages = sorted({item.lang for item in data.train if item.lang})
    # What every task's trainer takes (`FineTuningTrainer`); the task adds its own.
    common = dict(
        output_dir=options.output_dir,
        max_seq_length=options.max_seq_length,
        batch_size=options.batch_size,
        eval_batch_size=options.eval_batch_size,
        learning_rate=options.learning_rate,
        num_epochs=options.num_epochs,
        num_train_steps=options.num_train_steps,
        warmup_proportion=options.warmup_proportion,
        optimizer=options.optimizer,
        adam_bias_correction=options.adam_bias_correction,
        eval_every=options.eval_every,
        patience=options.patience,
        seed=options.seed,
        progress=options.progress,
        fused_kernels=options.fused_kernels,
        language=",".join(languages),
        strategy=strategy,
        gradient_accumulation_steps=options.gradient_accumulation_steps or 1,
        jit_compile=jit_compile,
        steps_per_loop=options.steps_per_loop,
        max_consecutive_nonfinite_steps=options.max_consecutive_nonfinite_steps,
    )
    trainer = task.trainer(model, tokenizer, data, options, **common)
    if options.gradient_accumulation_steps is None:  # auto: the memory plan decides
        accumulation = _planned_accumulation(trainer, data.train, devices, strategy)
        trainer.set_gradient_accumulation(accumulation)
        common["gradient_accumulation_steps"] = accumulation  # the test scores' trainer too
    result = trainer.fit(data.train, data.dev)
    summary = {k: v for k, v in result.items() if k != "history"}
    if data.test:
        with strategy.scope():
            best_model = task.load_model(result["best_dir"], dtype, data)
        best = task.trainer(best_model, tokenizer, data, options, **common | {"progress": False})
        summary["test"] = best.evaluate(data.test)
        summary.update(task.extra_scores(best, data.test, data.train, print))
    print(json.dumps(summary, indent=2))
    write_json_atomic(os.path.join(options.output_dir, SUMMARY_FILE), summary)
    if options.export_dir:
        from albert_tf.serving import export_saved_model

        # The card names the data as the run was given it, not the cache's files.
        card = task.model_card(given, data, summary)
        path = export_saved_model(result["best_dir"], options.export_dir, model_card=card)
        print(f"exported SavedModel: {path}")
    return summary
