"""Builds the offline `albert_corpus` tfds dataset from local files.

    python -m albert_tf.data.build_corpus --manual_dir=/data/my_corpus --data_dir=/data/tfds

(The ``tfds build`` CLI of tensorflow-datasets 4.9.10 needs apache_beam,
which this project does not install; this does the same for albert_corpus.)
"""

from __future__ import annotations

from absl import app, flags

_MANUAL_DIR = flags.DEFINE_string(
    "manual_dir", None, "Folder with the corpus files.", required=True
)
_DATA_DIR = flags.DEFINE_string("data_dir", None, "tfds data_dir (default ~/tensorflow_datasets).")


def main(argv: list[str]) -> None:
    del argv
    from albert_tf.data.tfds_corpus import build_albert_corpus

    builder = build_albert_corpus(_MANUAL_DIR.value, _DATA_DIR.value)
    for name, split in builder.info.splits.items():
        print(f"{name}: {split.num_examples} documents")
    print(f"built in {builder.data_dir}")


if __name__ == "__main__":
    app.run(main)
