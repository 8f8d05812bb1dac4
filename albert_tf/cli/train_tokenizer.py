r"""Trains an ALBERT tokenizer from text and saves it for `load_tokenizer`.

English (SentencePiece, google-research/albert's recipe):

    python -m albert_tf.train_tokenizer --kind=sentencepiece \
        --input=corpus/en_*.jsonl.gz --output_dir=runs/spm --vocab_size=30000

Chinese (BERT WordPiece vocab.txt):

    python -m albert_tf.train_tokenizer --kind=wordpiece \
        --input=corpus/zh.jsonl.gz --output_dir=runs/wp --vocab_size=21128

Inputs are read by the same reader as pretraining data
(`albert_tf.data.corpus`): plain text (one sentence a line) or JSON Lines with
a ``"sentences"`` list (or a ``"text"`` string), gzipped or not, told apart by
their content rather than their names. Files, globs, folders, ``sample:en`` /
``sample:zh`` and comma-separated lists are accepted
(`albert_tf.data.inputs.resolve_inputs`). Bad input (lines that are not valid
UTF-8, JSON that does not parse...) is skipped and counted in the final report.
"""

from __future__ import annotations

import sys
import time

from absl import flags, logging

from albert_tf.cli import runner
from albert_tf.data.corpus import ReadStats, iter_sentences
from albert_tf.data.inputs import resolve_inputs

FLAGS = flags.FLAGS
flags.DEFINE_list("input", None, "Training files, globs, folders or sample:en|zh, comma-separated.")
flags.DEFINE_string("output_dir", None, "Directory for the tokenizer files.")
flags.DEFINE_enum("kind", "sentencepiece", ["sentencepiece", "wordpiece"], "Tokenizer kind.")
flags.DEFINE_integer("vocab_size", 30000, "Target vocabulary size.")
flags.DEFINE_boolean("lower_case", True, "Uncased model: lower-case and strip accents.")
flags.DEFINE_boolean(
    "shrink_vocab",
    False,
    "sentencepiece: if the corpus is too small for --vocab_size, train the "
    "largest size it supports instead of failing.",
)
flags.DEFINE_boolean(
    "fold_punctuation",
    True,
    "sentencepiece: fold curly quotes, dashes and no-break spaces to keyboard characters "
    "when training and tokenising (recorded in tokenizer.json); off for the reference recipe.",
)
flags.DEFINE_float("character_coverage", 0.99995, "sentencepiece: character coverage.")
flags.DEFINE_list(
    "user_defined_symbols",
    ["(", ")", '"', "-", ".", "–", "£", "€"],
    "sentencepiece: pieces always kept whole (official ALBERT list).",
)
flags.DEFINE_integer(
    "input_sentence_size", 10_000_000, "sentencepiece: sentences sampled for training."
)
flags.DEFINE_integer("num_threads", 2, "sentencepiece: trainer threads.")
flags.DEFINE_boolean(
    "nfkc",
    True,
    "wordpiece: fold text with Unicode NFKC (full-width → ASCII) when training and "
    "tokenising (recorded in tokenizer.json).",
)
flags.DEFINE_boolean(
    "reserve_ascii", True, "wordpiece: keep ASCII letters, digits and punctuation."
)
flags.DEFINE_integer("num_unused", 99, "wordpiece: number of [unusedN] tokens.")
flags.DEFINE_integer("min_count", 2, "wordpiece: lowest word-frequency threshold.")
flags.DEFINE_integer("max_unique_chars", 20000, "wordpiece: alphabet size cap.")


def _progress(start: float):
    def report(count: int) -> None:
        rate = count / max(time.time() - start, 1e-6)
        sys.stderr.write(f"\r  read {count:,} sentences ({rate:,.0f}/s)")
        sys.stderr.flush()

    return report


def main() -> None:
    paths = resolve_inputs(FLAGS.input)  # missing files fail here, before training
    stats = ReadStats()
    sentences = iter_sentences(paths, stats)
    progress = _progress(time.time())
    if FLAGS.kind == "sentencepiece":
        from albert_tf.tokenizers.sentencepiece_training import train_sentencepiece

        tokenizer = train_sentencepiece(
            sentences,
            FLAGS.output_dir,
            vocab_size=FLAGS.vocab_size,
            lower_case=FLAGS.lower_case,
            fold_punctuation=FLAGS.fold_punctuation,
            character_coverage=FLAGS.character_coverage,
            user_defined_symbols=FLAGS.user_defined_symbols,
            input_sentence_size=FLAGS.input_sentence_size,
            shrink_vocab=FLAGS.shrink_vocab,
            num_threads=FLAGS.num_threads,
            progress=progress,
        )
    else:
        from albert_tf.tokenizers.wordpiece import train_wordpiece

        tokenizer = train_wordpiece(
            sentences,
            FLAGS.output_dir,
            vocab_size=FLAGS.vocab_size,
            lower_case=FLAGS.lower_case,
            nfkc=FLAGS.nfkc,
            reserve_ascii=FLAGS.reserve_ascii,
            num_unused=FLAGS.num_unused,
            min_count=FLAGS.min_count,
            max_unique_chars=FLAGS.max_unique_chars,
            progress=progress,
        )
    sys.stderr.write("\n")
    summary = f"{len(paths)} file(s); " + "; ".join(stats.summary().splitlines())
    if stats.skipped:
        logging.warning("skipped bad input: %s", summary)
    print(f"input: {summary}")
    print(
        f"wrote {tokenizer.kind} tokenizer with {tokenizer.vocabulary_size} entries "
        f"to {FLAGS.output_dir}"
    )


def run() -> None:
    """The `albert-train-tokenizer` console script."""
    runner.run(main, "train_tokenizer", required=["input", "output_dir"])


if __name__ == "__main__":
    run()
