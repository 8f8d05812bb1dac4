"""What a trained model must beat, each computed from the same data it sees.

`unigram` predicts every masked piece by its training frequency (held-out MLM);
`overlap` picks the multiple-choice option that shares the most words or
characters with the context; `bag_of_units` is a multinomial logistic regression
on character uni- and bigrams (or words) for text classification, and
`naive_bayes` multinomial naive Bayes on the same units; `gazetteer` finds the
training entities in new text (tagging); `people_sentence` answers "who took
part?" with the first sentence that names people (span QA).
"""
