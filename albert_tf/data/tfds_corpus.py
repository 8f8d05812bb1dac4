"""`albert_corpus`: a tensorflow-datasets builder for local corpora, offline.

tfds is the one door to pretraining data: local files become a tfds dataset
like any other, built from ``manual_dir`` with no network access. Every file
under ``manual_dir`` (recursively; text or jsonl, gzip or not — see
`albert_tf.data.corpus`) becomes part of a split:

* files under ``manual_dir/<split>/`` for ``<split>`` in ``train``,
  ``validation``, ``test`` go to that split;
* if there are no such folders, every file goes to ``train``.

Hidden files and ``*.md`` files are ignored. Each example is one document:
``{"id": "<relative path>:<n>", "text": sentences joined by "\\n"}``. Skipped
input (bad UTF-8, empty documents...) is counted and logged per split.

>>> import os, tempfile
>>> import tensorflow_datasets as tfds
>>> from albert_tf.data.tfds_corpus import AlbertCorpus
>>> root = tempfile.mkdtemp(); manual = os.path.join(root, "manual")
>>> os.makedirs(manual)
>>> _ = open(os.path.join(manual, "a.txt"), "w").write("One.\\nTwo.\\n\\nThree.\\n")
>>> builder = AlbertCorpus(data_dir=os.path.join(root, "data"))
>>> builder.download_and_prepare(  # doctest: +ELLIPSIS
...     download_config=tfds.download.DownloadConfig(manual_dir=manual))
Downloading and preparing dataset ...
>>> sorted(e["text"] for e in tfds.as_numpy(builder.as_dataset(split="train")))
[b'One.\\nTwo.', b'Three.']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import tensorflow_datasets as tfds
from absl import logging
from etils import epath

from albert_tf.data.corpus import (
    DEFAULT_MAX_SENTENCE_CHARS,
    Document,
    LocatedDocument,
    ReadStats,
    clean_sentences,
    emit_located,
    read_documents,
    split_lines,
    split_sentences,
)

_SPLITS = ("train", "validation", "test")


def _corpus_files(root: str) -> list[str]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name.lower().endswith(".md"):
                continue
            files.append(os.path.join(dirpath, name))
    return files


class AlbertCorpus(tfds.core.GeneratorBasedBuilder):
    """Local pretraining text (one sentence per line / jsonl), built offline."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Put your corpus files (BERT text format: one sentence per line, blank "
        "line between documents; or JSON Lines {'sentences': [...]}; gzip or "
        "not) in manual_dir, optionally in train/ validation/ test/ folders, "
        "and pass --manual_dir (tfds build) or "
        "DownloadConfig(manual_dir=...) (Python)."
    )

    # tfds 4.9.10 resolves `code_path` through the `importlib_resources`
    # backport, which its dependencies no longer install; the answer for a
    # builder in a regular package is simply this file.
    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> epath.Path:
        return epath.Path(__file__)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            description="Local ALBERT pretraining corpus; one document per example.",
            features=tfds.features.FeaturesDict(
                {"id": tfds.features.Text(), "text": tfds.features.Text()}
            ),
            supervised_keys=None,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        root = os.fspath(dl_manager.manual_dir)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"albert_corpus: manual_dir {root!r} does not exist")
        present = [s for s in _SPLITS if os.path.isdir(os.path.join(root, s))]
        if present:
            splits = {s: _corpus_files(os.path.join(root, s)) for s in present}
        else:
            splits = {"train": _corpus_files(root)}
        for split, files in splits.items():
            if not files:
                raise FileNotFoundError(f"albert_corpus: no files for split {split!r} in {root}")
        return {
            split: self._generate_examples(root=root, files=files, split=split)
            for split, files in splits.items()
        }

    def _generate_examples(self, root: str, files: list[str], split: str):
        stats = ReadStats()
        for path in files:
            rel = os.path.relpath(path, root)
            for n, doc in enumerate(read_documents(path, stats=stats)):
                key = f"{rel}:{n}"
                yield key, {"id": key, "text": "\n".join(doc)}
        logging.info("albert_corpus[%s]: %s", split, stats.summary().replace("\n", "; "))
        if stats.skipped:
            logging.warning("albert_corpus[%s]: skipped input: %s", split, dict(stats.skipped))


def build_albert_corpus(manual_dir: str, data_dir: str | None = None) -> AlbertCorpus:
    """Builds (or reuses) `albert_corpus` from ``manual_dir``, offline.

    Returns the builder; read it with ``builder.as_dataset(split=...)`` or
    ``tfds.load("albert_corpus", data_dir=data_dir)``.
    """
    builder = AlbertCorpus(data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir)
    )
    return builder


# --------------------------------------------------------------------------
# Reading any tensorflow-datasets dataset with a text feature


def find_text_feature(features) -> str:
    """``"text"`` if it is a `tfds.features.Text`, else the first Text feature."""
    if "text" in features and isinstance(features["text"], tfds.features.Text):
        return "text"
    for name, feature in features.items():
        if isinstance(feature, tfds.features.Text):
            return name
    raise ValueError(f"dataset has no top-level Text feature (features: {list(features)})")


def tfds_documents(name: str, **kwargs) -> Iterator[Document]:
    """Documents from any tensorflow-datasets dataset with a text feature
    (`tfds_located_documents` without the positions)."""
    for _, document in tfds_located_documents(name, **kwargs):
        yield document


def tfds_located_documents(
    name: str,
    *,
    split: str = "train",
    first_index: int = 0,
    data_dir: str | None = None,
    text_key: str | None = None,
    splitter: Callable[[str], list[str]] | None = None,
    stats: ReadStats | None = None,
    max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
    download: bool = False,
) -> Iterator[LocatedDocument]:
    """``(index, document)`` from any tensorflow-datasets dataset with a text
    feature; ``index`` counts examples from ``first_index`` (the position of
    ``split``'s first example in its parent split, for a sub-split).

    Each example's text becomes one document, split into sentences with
    ``splitter`` (default: `split_sentences`; `split_lines` for the
    ``albert_corpus`` builder, whose text is already one sentence per line).
    Examples whose text is not valid UTF-8 are counted (``invalid_utf8``).

    Args:
      name: tfds name, e.g. ``"albert_corpus"`` or ``"wikipedia/20230601.en"``.
      split: a tfds split expression (``"train[:10%]"`` works).
      first_index: the index of the split's first example.
      data_dir: tfds data directory.
      text_key: the text feature; default: `find_text_feature`.
      download: let tfds download/prepare (default: offline, must be built).
    """
    stats = stats if stats is not None else ReadStats()
    builder = tfds.builder(name, data_dir=data_dir)
    if download:
        builder.download_and_prepare()
    try:
        key = text_key or find_text_feature(builder.info.features)
    except ValueError as e:
        raise ValueError(
            f"tfds dataset {name!r}: {e}; pass the feature that holds the text (--tfds_text_key)"
        ) from None
    if splitter is None:
        splitter = split_lines if builder.name == "albert_corpus" else split_sentences
    ds = builder.as_dataset(split=split, shuffle_files=False)
    for index, example in enumerate(tfds.as_numpy(ds), start=first_index):
        raw = example[key]
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        except UnicodeDecodeError:
            stats.skip("invalid_utf8")
            continue
        sentences = clean_sentences(
            splitter(text),
            stats,
            max_sentence_chars=max_sentence_chars,
            count_empty=False,
        )
        yield from emit_located(index, sentences, stats)
