"""Token tagging: named entities as labelled character spans of a text.

The spec (names only); the parts are the files beside this one.
"""

from albert_tf.tasks.spec import TaskSpec

_HERE = "albert_tf.tasks.tagging"

SPEC = TaskSpec(
    name="tagging",
    head="tagger_head",
    hf_architecture="AlbertForTokenClassification",
    parts={
        "settings": f"{_HERE}.settings:TaggingSettings",
        "head": f"{_HERE}.head:TokenClassifierHead",
        "model": f"{_HERE}.model:AlbertTokenClassifier",
        "trainer": f"{_HERE}.trainer:TaggingTrainer",
        "serving": f"{_HERE}.serving:TaggerServingModule",
        "predict": f"{_HERE}.predict:TaggingPredictor",
        "task": f"{_HERE}.task:TaggingTask",
    },
    description="find named entities (people, places, organisations) as character spans",
    labelled=True,
)
