"""From raw corpus files to a tokenizer and train/held-out pretraining shards.

`prepare_pretraining_data` is what lets ``python -m albert_tf.pretrain`` start
from text: it holds out every n-th document, trains a tokenizer if none is
given, and writes the shards — each step only once, so a restarted run
reuses what an earlier one prepared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib

from albert_tf import storage
from albert_tf.data.corpus import ReadStats, read_corpus
from albert_tf.data.shards import write_pretraining_data
from albert_tf.storage import write_json_atomic
from albert_tf.tokenizers import load_tokenizer, train_sentencepiece, train_wordpiece

DONE_FILE = "prepared.json"


@dataclasses.dataclass(frozen=True)
class PreparedData:
    tokenizer_dir: str
    train_files: str
    eval_files: str | None
    summary: dict


def _is_held_out(document: list[str], eval_every: int) -> bool:
    # By content, not position: adding files does not reshuffle the split.
    return eval_every > 0 and zlib.crc32("\n".join(document).encode()) % eval_every == 0


def prepare_pretraining_data(
    corpus: str,
    work_dir: str,
    *,
    tokenizer_dir: str | None = None,
    tokenizer_kind: str = "sentencepiece",
    vocab_size: int = 30000,
    shrink_vocab: bool = True,
    lower_case: bool = True,
    nfkc: bool = True,
    fold_punctuation: bool = True,
    max_seq_length: int = 512,
    sentence_task: str = "sop",
    dupe_factor: int = 10,
    eval_every: int = 20,
    num_shards: int = 4,
    seed: int = 12345,
    log=print,
) -> PreparedData:
    """Splits, tokenises and writes shards under ``work_dir`` (once).

    ``nfkc`` / ``fold_punctuation``: a WordPiece tokenizer trained here folds text
    with NFKC (`WordPieceTokenizer`), a SentencePiece one folds typographic
    punctuation (`SentencePieceTokenizer`); an existing ``tokenizer_dir`` keeps its
    own settings.
    """
    done = os.path.join(work_dir, DONE_FILE)
    if storage.exists(done):
        record = json.loads(storage.read_text(done))
        log(f"using data prepared earlier in {work_dir}")
        return PreparedData(**record)

    storage.makedirs(work_dir)
    stats = ReadStats()
    splits: dict[str, list[list[str]]] = {"train": [], "eval": []}
    # Files, globs, folders or sample:en / sample:zh (`resolve_inputs`).
    for document in read_corpus(corpus, stats=stats, what="corpus"):
        splits["eval" if _is_held_out(document, eval_every) else "train"].append(document)
    if not splits["train"]:
        raise ValueError(f"{corpus} holds no usable documents ({stats.summary()}).")
    log(
        f"read {stats.documents} documents: {len(splits['train'])} train, "
        f"{len(splits['eval'])} held out; " + stats.summary().replace("\n", "; ")
    )
    corpus_files = {}
    for name, documents in splits.items():
        if not documents:
            continue
        corpus_files[name] = os.path.join(work_dir, f"{name}_corpus.jsonl")
        with storage.open_file(corpus_files[name], "w") as f:
            for i, document in enumerate(documents):
                f.write(
                    json.dumps({"id": f"{name}-{i}", "sentences": document}, ensure_ascii=False)
                    + "\n"
                )

    if tokenizer_dir is None:
        tokenizer_dir = os.path.join(work_dir, "tokenizer")
        sentences = [s for document in splits["train"] for s in document]
        log(
            f"training a {tokenizer_kind} tokenizer ({vocab_size} pieces at most) "
            f"on {len(sentences)} sentences"
        )
        if tokenizer_kind == "sentencepiece":
            train_sentencepiece(
                sentences,
                tokenizer_dir,
                vocab_size=vocab_size,
                lower_case=lower_case,
                fold_punctuation=fold_punctuation,
                shrink_vocab=shrink_vocab,
            )
        elif tokenizer_kind == "wordpiece":
            train_wordpiece(
                sentences, tokenizer_dir, vocab_size=vocab_size, lower_case=lower_case, nfkc=nfkc
            )
        else:
            raise ValueError(
                f"tokenizer_kind must be sentencepiece or wordpiece, got {tokenizer_kind!r}"
            )
    tokenizer = load_tokenizer(tokenizer_dir)
    log(f"tokenizer: {tokenizer.kind}, {tokenizer.vocabulary_size} pieces ({tokenizer_dir})")

    summary = {
        "read": {
            "documents": stats.documents,
            "sentences": stats.sentences,
            "skipped": dict(stats.skipped),
        }
    }
    shard_patterns: dict[str, str] = {}
    for name, path in corpus_files.items():
        out = os.path.join(work_dir, f"{name}_shards")
        written = write_pretraining_data(
            tokenizer=tokenizer,
            output_dir=out,
            inputs=[path],
            max_seq_length=max_seq_length,
            sentence_task=sentence_task,
            # Held-out pairs are made once: evaluation should not weigh
            # documents by a dupe factor.
            dupe_factor=dupe_factor if name == "train" else 1,
            num_shards=num_shards if name == "train" else 1,
            seed=seed + (name == "eval"),
            log=log,
        )
        summary[name] = written.to_dict()
        shard_patterns[name] = os.path.join(out, "*.tfrecord")
    record = {
        "tokenizer_dir": tokenizer_dir,
        "train_files": shard_patterns["train"],
        "eval_files": shard_patterns.get("eval"),
        "summary": summary,
    }
    write_json_atomic(done, record)
    return PreparedData(**record)
