"""What a trained model must beat, each computed from the same data it sees.

`unigram` predicts every masked piece by its training frequency (held-out MLM);
`overlap` picks the multiple-choice option that shares the most words or
characters with the context; `bag_of_units` is a multinomial logistic regression
on character uni- and bigrams (or words) for text classification.
"""
