"""Training ALBERT's SentencePiece model (google-research/albert's ``spm_train`` recipe).

The trainer reads the text after the normalisation the tokenizer applies
(`albert_tf.tokenizers.normalization`, the same graph ops), and the result is
saved as a `SentencePieceTokenizer` directory.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import sentencepiece as spm
import tensorflow as tf

from albert_tf import storage
from albert_tf.tokenizers.normalization import folded_characters, normalize_text
from albert_tf.tokenizers.sentencepiece import SentencePieceTokenizer

# google-research/albert's spm_train recipe.
OFFICIAL_USER_DEFINED_SYMBOLS: tuple[str, ...] = ("(", ")", '"', "-", ".", "–", "£", "€")
_NORMALIZE_BATCH = 2048


def normalized_lines(
    sentences: Iterable[str],
    *,
    lower_case: bool = True,
    remove_space: bool = True,
    keep_accents: bool = False,
    fold_punctuation: bool = False,
) -> Iterator[str]:
    """Applies :func:`normalize_text` (the very graph ops the tokenizer runs)
    to a stream of sentences, in batches; yields one-line strings."""

    def flush(batch: list[str]) -> Iterator[str]:
        out = normalize_text(
            tf.constant(batch),
            lower_case=lower_case,
            remove_space=remove_space,
            keep_accents=keep_accents,
            fold_punctuation=fold_punctuation,
        )
        for value in out.numpy():
            # One sentence per line in the trainer's input file.
            line = value.decode("utf-8").replace("\r", " ").replace("\n", " ")
            if line.strip():
                yield line

    batch: list[str] = []
    for sentence in sentences:
        batch.append(sentence)
        if len(batch) == _NORMALIZE_BATCH:
            yield from flush(batch)
            batch = []
    if batch:
        yield from flush(batch)


def train_sentencepiece(
    sentences: Iterable[str],
    output_dir: str | os.PathLike[str],
    *,
    vocab_size: int = 30000,
    lower_case: bool = True,
    remove_space: bool = True,
    keep_accents: bool = False,
    fold_punctuation: bool = True,
    character_coverage: float = 0.99995,
    user_defined_symbols: Sequence[str] = OFFICIAL_USER_DEFINED_SYMBOLS,
    input_sentence_size: int = 10_000_000,
    shrink_vocab: bool = False,
    num_threads: int = 2,
    progress: Callable[[int], None] | None = None,
    verbose: bool = False,
) -> SentencePieceTokenizer:
    """Trains ALBERT's unigram SentencePiece model and saves the tokenizer.

    The recipe is google-research/albert's: unigram, pad=0, unk=1, no BOS/EOS,
    control symbols [CLS]=2, [SEP]=3, [MASK]=4, character coverage 0.99995,
    the official user-defined punctuation symbols, and shuffled sampling of at
    most ``input_sentence_size`` sentences. The trainer sees the text after
    the same normalisation :meth:`SentencePieceTokenizer.tokenize` applies.

    When the corpus cannot support ``vocab_size`` pieces, SentencePiece stops
    with the largest size it could reach; this raises ``ValueError`` naming
    that size, unless ``shrink_vocab`` is set, in which case it retrains at
    that size (and logs it).

    Args:
      sentences: training text, one sentence per item.
      output_dir: where ``spiece.model``, ``spiece.vocab`` and
        ``tokenizer.json`` are written.
      progress: called with the running count of sentences normalised.

    Raises:
      ValueError: empty corpus, or vocabulary too large (see above).

    Example:
        >>> tok = train_sentencepiece(lines, "/tmp/spm", vocab_size=1000)  # doctest: +SKIP
        >>> tok.vocabulary[:5]  # doctest: +SKIP
        ['<pad>', '<unk>', '[CLS]', '[SEP]', '[MASK]']
    """
    out = os.fspath(output_dir)
    storage.makedirs(out)
    with tempfile.TemporaryDirectory() as tmp:
        text_file = Path(tmp) / "train.txt"
        count = 0
        with open(text_file, "w", encoding="utf-8") as handle:
            for line in normalized_lines(
                sentences,
                lower_case=lower_case,
                remove_space=remove_space,
                keep_accents=keep_accents,
                fold_punctuation=fold_punctuation,
            ):
                handle.write(line + "\n")
                count += 1
                if progress is not None and count % _NORMALIZE_BATCH == 0:
                    progress(count)
        if progress is not None:
            progress(count)
        if count == 0:
            raise ValueError("training corpus is empty: no non-blank sentences to train on")

        folded = set(folded_characters()) if fold_punctuation else set()
        # A folded character never reaches the model: no piece for it (and a
        # user-defined one would bypass the normaliser of an exported model).
        symbols = [s for s in user_defined_symbols if not set(s) & folded]
        if len(symbols) < len(user_defined_symbols):
            logging.info(
                "fold_punctuation: user-defined symbols %s left out (folding removes them)",
                sorted(set(user_defined_symbols) - set(symbols)),
            )

        def run(size: int) -> None:
            spm.SentencePieceTrainer.train(
                input=str(text_file),
                model_prefix=str(Path(tmp) / "spiece"),
                model_type="unigram",
                vocab_size=size,
                pad_id=0,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                user_defined_symbols=symbols,
                character_coverage=character_coverage,
                input_sentence_size=input_sentence_size,
                shuffle_input_sentence=True,
                num_threads=num_threads,
                minloglevel=0 if verbose else 2,
            )

        try:
            run(vocab_size)
        except RuntimeError as err:
            match = re.search(r"Vocabulary size (?:is )?too high \((\d+)\).*?<= (\d+)", str(err))
            if match is None:
                raise
            largest = int(match.group(2))
            if not shrink_vocab:
                raise ValueError(
                    f"the corpus ({count} sentences) supports at most {largest} "
                    f"SentencePiece pieces, not {vocab_size}: pass a smaller "
                    "vocab_size, more text, or shrink_vocab=True (--shrink_vocab)"
                ) from err
            logging.warning(
                "corpus supports only %d pieces; shrinking vocab_size from %d",
                largest,
                vocab_size,
            )
            run(largest)
        model_proto = (Path(tmp) / "spiece.model").read_bytes()
        storage.copy(Path(tmp) / "spiece.vocab", os.path.join(out, "spiece.vocab"))
    tokenizer = SentencePieceTokenizer(
        model_proto,
        lower_case=lower_case,
        remove_space=remove_space,
        keep_accents=keep_accents,
        fold_punctuation=fold_punctuation,
    )
    tokenizer.save(out)
    return tokenizer
