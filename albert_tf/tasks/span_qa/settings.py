"""`SpanQASettings`: how questions and long contexts are cut, and how answers are picked."""

from __future__ import annotations

import dataclasses

from albert_tf.tasks.settings import TaskSettings, setting


@dataclasses.dataclass(frozen=True)
class SpanQASettings(TaskSettings):
    """Span QA's options of a fine-tuning run (``finetune`` flags of the same names); the
    defaults are the official ``run_squad``'s."""

    max_query_length: int = setting(
        64, "span_qa: question pieces kept (the first ones).", lower_bound=1
    )
    doc_stride: int = setting(
        128,
        "span_qa: pieces between the starts of a long context's windows (each window holds "
        "as many context pieces as fit after the question).",
        lower_bound=1,
    )
    max_answer_length: int = setting(30, "span_qa: longest answer, in pieces.", lower_bound=1)
    n_best_size: int = setting(
        20, "span_qa: candidate spans kept per window and question.", lower_bound=1
    )
