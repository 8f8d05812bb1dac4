"""Rebuild the Streamlit demo's models from scratch: ``python -m albert_tf.demo_models``.

The flags of `albert_tf.recipes.demo_models`, which says what each stage does. For
each language (``--languages=zh,en``): split the corpora's documents (``--zh_corpora``,
``--en_corpora``; by default the shared corpora), start from the shipped encoder
(``--zh_encoder``, ``--en_encoder``) or, with the flag empty, pretrain one, fine-tune it
on next-sentence items, score it (also on ``--zh_shared_sets`` / ``--en_shared_sets``)
and export it with a model card.

Each stage's output stays in ``--work_dir``; a stage whose output exists is not
redone, so an interrupted rebuild continues (pretraining also resumes from its
last checkpoint). ``--stages`` runs a subset; ``--stages=prepare,rescore`` scores an
already exported model on today's test items and rewrites its card's figures.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from albert_tf import storage
from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.data.inputs import resolve_inputs
from albert_tf.recipes.demo_models import (
    DEFAULT_STAGES,
    ENCODERS,
    LANGUAGES,
    STAGES,
    DemoBuild,
    build,
)

#: The shared data folder the default corpora and multiple-choice sets are in.
SHARED = "../shared/data"
CORPORA = {
    "zh": [f"{SHARED}/corpus/zh_peoples_daily_1998.jsonl.gz"],
    "en": [
        f"{SHARED}/corpus/en_sotu.jsonl.gz",
        f"{SHARED}/corpus/en_austen.jsonl.gz",
        f"{SHARED}/corpus/en_web_bible.jsonl.gz",
    ],
}
SHARED_SETS = {
    "zh": [f"{SHARED}/multiple_choice/parable_zh.jsonl.gz"],
    "en": [
        f"{SHARED}/multiple_choice/parable_en.jsonl.gz",
        f"{SHARED}/multiple_choice/socialiqa_evals.jsonl.gz",
        f"{SHARED}/multiple_choice/quartz.jsonl.gz",
    ],
}

FLAGS = flags.FLAGS
flags.DEFINE_list("languages", list(LANGUAGES), "Which demo models to build.")
flags.DEFINE_list(
    "stages",
    list(DEFAULT_STAGES),
    f"Stages to run, of {', '.join(STAGES)}. rescore scores the exported "
    "albert_demo_<lang>/<version> on the prepared test items and rewrites its card's "
    "held-out figures (for a model exported before a figure existed).",
)
flags.DEFINE_string("work_dir", "runs/demo_models", "Splits, pretraining and fine-tuning runs.")
flags.DEFINE_string("export_base", "models/exported", "Where albert_demo_<lang>/ go.")
flags.DEFINE_string("configs_dir", "configs", "Where demo_<lang>_{pretrain,finetune}.flags are.")
for _lang, _name in (("zh", "Chinese"), ("en", "English")):
    flags.DEFINE_string(
        f"{_lang}_corpora",
        ",".join(CORPORA[_lang]),
        f"The {_name} demo's corpora (files, globs, folders, sample:{_lang}); their "
        "documents are split into test, fine-tuning and pretraining text.",
    )
    flags.DEFINE_list(
        f"{_lang}_shared_sets",
        SHARED_SETS[_lang],
        f"Multiple-choice sets the evaluate stage also scores the {_name} model on "
        "(up to 1,000 items each; a file that is not there is left out).",
    )
    flags.DEFINE_string(
        f"{_lang}_encoder",
        ENCODERS[_lang],
        f"Pretrained model directory the {_name} demo fine-tunes from, with its tokenizer "
        "(the shipped one by default: it never saw the default corpora's dev and test "
        "documents; the English one has a WordPiece vocabulary); empty: pretrain one first "
        f"(the pretrain stage, configs/demo_{_lang}_pretrain.flags).",
    )
flags.DEFINE_integer("version", 1, "SavedModel version to write.")
flags.DEFINE_string(
    "previous_model",
    None,
    "A SavedModel to score beside the new one on the same held-out items; default: the "
    "newest albert_demo_<lang> version under --export_base other than --version.",
)
flags.DEFINE_integer("seed", 0, "Seed of the items (distractors, answer positions).")
flags.DEFINE_bool(
    "pretrain_on_finetune_text",
    False,
    "Also pretrain on the fine-tuning documents no dev item comes from: more text, while "
    "dev and test documents stay unseen until fine-tuning and scoring.",
)


def main() -> None:
    unknown = set(FLAGS.stages) - set(STAGES)
    if unknown:
        raise UserError(f"unknown stages {sorted(unknown)}; choose from {', '.join(STAGES)}")
    for lang in FLAGS.languages:
        if lang not in LANGUAGES:
            raise UserError(f"no demo model for language {lang!r}; choose from zh, en")
    # Checked before any work starts; the messages name the flag that overrides.
    corpora = {
        lang: resolve_inputs(FLAGS[f"{lang}_corpora"].value, what=f"--{lang}_corpora")
        for lang in FLAGS.languages
    }
    for lang in FLAGS.languages:
        _check_encoder(lang)
    for lang in FLAGS.languages:
        build(
            DemoBuild(
                lang=lang,
                corpora=corpora[lang],
                shared_sets=FLAGS[f"{lang}_shared_sets"].value,
                encoder=FLAGS[f"{lang}_encoder"].value or "",
                stages=tuple(FLAGS.stages),
                work_dir=FLAGS.work_dir,
                export_base=FLAGS.export_base,
                configs_dir=FLAGS.configs_dir,
                version=FLAGS.version,
                previous_model=FLAGS.previous_model,
                seed=FLAGS.seed,
                pretrain_on_finetune_text=FLAGS.pretrain_on_finetune_text,
            )
        )


def _check_encoder(lang: str) -> None:
    """Refuses an encoder that is not a model directory, or pretraining asked for by name
    beside one; warns where the shipped encoder may have read dev documents."""
    encoder = FLAGS[f"{lang}_encoder"].value
    if not encoder or not {"pretrain", "finetune"} & set(FLAGS.stages):
        return
    if not storage.isfile(os.path.join(encoder, "config.json")):  # a local path or a URL
        raise UserError(
            f"--{lang}_encoder={encoder} is not a model directory (no config.json); "
            f"give one, or --{lang}_encoder= (empty) to pretrain one"
        )
    if FLAGS["stages"].present and "pretrain" in FLAGS.stages:
        raise UserError(
            f"--stages asks for pretraining, and --{lang}_encoder={encoder} is fine-tuned "
            f"from instead: add --{lang}_encoder= (empty) to pretrain"
        )
    overridden = FLAGS[f"{lang}_corpora"].present or FLAGS.seed != 0
    if encoder == ENCODERS[lang] and overridden:
        # Its pretraining text is the default corpora's split with seed 0.
        print(
            f"[{lang}] warning: {encoder} was pretrained on the default corpora's split "
            "(--seed=0); with other corpora or seeds it may have read dev or test documents",
            file=sys.stderr,
        )


def run() -> None:
    """The `albert-demo-models` console script."""
    runner.run(main, "demo_models")


if __name__ == "__main__":
    run()
