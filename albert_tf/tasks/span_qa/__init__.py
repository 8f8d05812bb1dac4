"""Extractive question answering: the answer to a question as a span of its context.

The spec (names only); the parts are the files beside this one.
"""

from albert_tf.tasks.spec import TaskSpec

_HERE = "albert_tf.tasks.span_qa"

SPEC = TaskSpec(
    name="span_qa",
    head="span_head",
    hf_architecture="AlbertForQuestionAnswering",
    parts={
        "settings": f"{_HERE}.settings:SpanQASettings",
        "head": f"{_HERE}.head:SpanHead",
        "model": f"{_HERE}.model:AlbertSpanQA",
        "trainer": f"{_HERE}.trainer:SpanQATrainer",
        "serving": f"{_HERE}.serving:SpanQAServingModule",
        "predict": f"{_HERE}.predict:SpanQAPredictor",
        "task": f"{_HERE}.task:SpanQATask",
    },
    description="answer a question with a span of its context (SQuAD, CMRC 2018, DRCD)",
)
