"""Rebuilding the Streamlit demo's models from raw text (``python -m albert_tf.demo_models``).

For each language, from the corpora it is given (`DemoBuild`):

1. split the documents by a stable hash: 10% test, 30% fine-tuning, 60% pretraining
   (`items.document_split`);
2. start from a pretrained encoder (by default the language's shipped one,
   `card.ENCODERS`: ``models/pretrained/``, pretrained on the default corpora's
   pretraining documents, never on their dev or test documents), or, without one,
   pretrain a small ALBERT on the pretraining documents
   (``configs/demo_<lang>_pretrain.flags``, through ``albert_tf.pretrain``);
3. fine-tune it for "which option continues the context?" on items built from the
   fine-tuning and pretraining documents (dev items from fine-tuning documents
   that no training item comes from) (``configs/demo_<lang>_finetune.flags``, through
   ``albert_tf.finetune``): 4 options, the true next sentence and three sentences
   of other documents of the same corpus; each context is the previous sentence
   and, within a budget drawn per item from 0 to ``CONTEXT_CHARS``, earlier ones
   (`albert_tf.tasks.multiple_choice.next_sentence`);
4. add the options' overlap with the context to its score, two weights fitted on the
   dev items (`combine`; the export computes both parts in its graph);
5. score it on the test documents' items, with the full context budget and with one
   sentence of context (the same questions), against chance, the four overlap
   baselines (the strongest is "the baseline") and the previously exported model,
   and on shared multiple-choice sets (no tuning to them) (`scoring`);
6. export ``<export_base>/albert_demo_<lang>/<version>/`` with a model card in
   ``assets.extra/model_card.json`` (`card`), which the app shows.

Each stage's output stays in the work folder; a stage whose output exists is not
redone, so an interrupted rebuild continues (pretraining also resumes from its
last checkpoint). The ``rescore`` stage scores an already exported model on
today's test items and rewrites its card's figures.
"""

from albert_tf.recipes.demo_models.build import DEFAULT_STAGES, STAGES, DemoBuild, build
from albert_tf.recipes.demo_models.card import ENCODERS, model_card
from albert_tf.recipes.demo_models.items import LANGUAGES, document_split, prepare
from albert_tf.recipes.demo_models.scoring import evaluate, rescore

__all__ = [
    "DEFAULT_STAGES",
    "ENCODERS",
    "LANGUAGES",
    "STAGES",
    "DemoBuild",
    "build",
    "document_split",
    "evaluate",
    "model_card",
    "prepare",
    "rescore",
]
