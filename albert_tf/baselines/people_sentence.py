"""What a population-span QA model must beat: the first sentence that names people.

For questions such as "Who were the participants of this study?" (the PICO
population set), the answer is usually a phrase of the sentence that first
mentions patients, participants or subjects. This baseline answers with that
whole sentence (`albert_tf.data.corpus.split_sentences`), or the context's first
sentence when none names people; SQuAD's F1 gives it partial credit for the
answer's words inside it.

>>> context = "Drug X lowers pressure. We enrolled 40 adults with glaucoma. They improved."
>>> first_people_sentence(context)
(24, 60, 'We enrolled 40 adults with glaucoma.')
"""

from __future__ import annotations

import re

from albert_tf.data.corpus import split_sentences

#: Words that name the people a study is about (English, lower-case stems).
PEOPLE_WORDS = (
    "patient", "participant", "subject", "volunteer", "people", "person", "individual",
    "adult", "child", "children", "infant", "neonate", "newborn", "adolescent", "student",
    "women", "woman", "men", "man", "girl", "boy", "mother", "smoker", "worker", "resident",
    "case", "elderly", "veteran", "athlete", "user", "recipient", "survivor", "population",
)  # fmt: skip
_PEOPLE = re.compile(r"\b(" + "|".join(PEOPLE_WORDS) + r")s?\b", re.IGNORECASE)


def first_people_sentence(context: str) -> tuple[int, int, str]:
    """``(start, end, text)`` of the context's first sentence naming people (else its
    first sentence); characters, end exclusive."""
    sentences = split_sentences(context) or [context]
    chosen = next((s for s in sentences if _PEOPLE.search(s)), sentences[0])
    start = context.find(chosen)
    return start, start + len(chosen), chosen
