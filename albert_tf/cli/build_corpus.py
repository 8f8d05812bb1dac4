"""Builds the offline `albert_corpus` tfds dataset from local files.

    python -m albert_tf.build_corpus --manual_dir=/data/my_corpus --data_dir=/data/tfds

(The ``tfds build`` CLI of tensorflow-datasets 4.9.10 needs apache_beam,
which only the optional ``beam`` extra installs; this does the same for
albert_corpus without it.)
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli import runner

_MANUAL_DIR = flags.DEFINE_string("manual_dir", None, "Folder with the corpus files.")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "tfds data_dir (default ~/tensorflow_datasets).")


def main() -> None:
    from albert_tf.data.tfds_corpus import build_albert_corpus

    builder = build_albert_corpus(_MANUAL_DIR.value, _DATA_DIR.value)
    for name, split in builder.info.splits.items():
        print(f"{name}: {split.num_examples} documents")
    print(f"built in {builder.data_dir}")


def run() -> None:
    """The `albert-build-corpus` console script."""
    runner.run(main, "build_corpus", required=["manual_dir"])


if __name__ == "__main__":
    run()
