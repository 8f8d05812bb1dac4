"""Text classification: a label (or a score) for a text or a text pair.

The spec (names only); the parts are the files beside this one.
"""

from albert_tf.tasks.spec import TaskSpec

_HERE = "albert_tf.tasks.classification"

SPEC = TaskSpec(
    name="classification",
    head="classifier_head",
    hf_architecture="AlbertForSequenceClassification",
    parts={
        "settings": f"{_HERE}.settings:ClassificationSettings",
        "model": f"{_HERE}.model:AlbertTextClassifier",
        "trainer": f"{_HERE}.trainer:ClassificationTrainer",
        "serving": f"{_HERE}.serving:TextClassifierServingModule",
        "predict": f"{_HERE}.predict:ClassificationPredictor",
        "task": f"{_HERE}.task:ClassificationTask",
    },
    description="label a text or a text pair (sentiment, NLI), or score it (STS-B)",
    labelled=True,
    keras_hub_class="AlbertTextClassifier",
)
