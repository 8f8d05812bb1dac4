"""`MultipleChoiceSettings`: how much of a question, its options and its context are kept."""

from __future__ import annotations

import dataclasses

from albert_tf.tasks.settings import TaskSettings, setting

#: Which end of an over-long context is kept (`albert_tf.tasks.multiple_choice.data`).
CONTEXT_KEEP = ("start", "end")


@dataclasses.dataclass(frozen=True)
class MultipleChoiceSettings(TaskSettings):
    """Multiple choice's options of a fine-tuning run (``finetune`` flags of the same names)."""

    max_qa_length: int = setting(
        128, "multiple_choice: question+option pieces kept (the last ones)."
    )
    context_keep: str = setting(
        "start",
        "multiple_choice: which end of a too-long context is kept: start (a reading passage) or "
        "end (a 'what comes next?' item, whose clue is the text just before the options).",
        choices=CONTEXT_KEEP,
    )
