"""Multiple choice: which option answers or continues a context?

The spec (names only); the parts are the files beside this one.
"""

from albert_tf.tasks.spec import TaskSpec

_HERE = "albert_tf.tasks.multiple_choice"

SPEC = TaskSpec(
    name="multiple_choice",
    head="multiple_choice_head",
    hf_architecture="AlbertForMultipleChoice",
    parts={
        "settings": f"{_HERE}.settings:MultipleChoiceSettings",
        "head": f"{_HERE}.head:MultipleChoiceHead",
        "model": f"{_HERE}.model:AlbertMultipleChoice",
        "trainer": f"{_HERE}.trainer:MultipleChoiceTrainer",
        "serving": f"{_HERE}.serving:MultipleChoiceServingModule",
        "predict": f"{_HERE}.predict:MultipleChoicePredictor",
        "task": f"{_HERE}.task:MultipleChoiceTask",
    },
    description="score each option of an item against its context (RACE, C3, next sentence)",
    litert=True,
)
