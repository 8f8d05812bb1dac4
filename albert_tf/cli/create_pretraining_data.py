r"""Writes sharded TFRecords of unmasked ALBERT pretraining pairs.

Masking happens later, dynamically, in `albert_tf.data.pretraining_dataset`.

Example (the embedded English sample, a trained tokenizer)::

    python -m albert_tf.create_pretraining_data \
        --input=albert_tf/data/sample/en_sample.jsonl \
        --tokenizer_dir=runs/tok_en --output_dir=runs/pretrain_en \
        --max_seq_length=128 --dupe_factor=5 --num_shards=4

Any tensorflow-datasets dataset with a text feature works too
(``--tfds_name=albert_corpus --tfds_data_dir=...`` for local files built
offline, see `albert_tf.data.tfds_corpus`).

Memory does not grow with the corpus: the input is cut into tasks of
``--task_bytes`` (or tfds slices), each streamed one pool of documents at a
time. The same command run again after an interruption redoes only the tasks
that had not finished.

By default the tasks run in ``--num_workers`` processes of this machine. With
``--runner`` they run as an Apache Beam pipeline (`albert_tf.data.shards.beam`,
``pip install -e '.[beam]'``) on any Beam runner, which gives the same examples;
further Beam options go in one string, ``--beam_pipeline_options``::

    python -m albert_tf.create_pretraining_data \
        --input=sample:en --tokenizer_dir=runs/tok_en --output_dir=runs/pretrain_en \
        --runner=DirectRunner \
        --beam_pipeline_options="--direct_num_workers=2 --direct_running_mode=multi_processing"

On Dataflow, Flink or Spark every worker must reach the inputs and the output
directory (docs/data.md, "Wikipedia-sized corpora").
"""

from __future__ import annotations

import importlib.util
import shlex

from absl import flags

from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.data.examples import PACKINGS, SENTENCE_TASKS
from albert_tf.data.input_tasks import POOL_BYTES, TASK_BYTES

_INPUT = flags.DEFINE_list(
    "input",
    None,
    "Input files, globs or folders (text or JSON Lines, gzip or not), or sample:en|zh.",
)
_TFDS_NAME = flags.DEFINE_string(
    "tfds_name", None, "A tfds dataset with a text feature, instead of --input."
)
_TFDS_SPLIT = flags.DEFINE_string("tfds_split", "train", "tfds split expression.")
_TFDS_DATA_DIR = flags.DEFINE_string("tfds_data_dir", None, "tfds data_dir.")
_TFDS_TEXT_KEY = flags.DEFINE_string(
    "tfds_text_key", None, "tfds text feature (default: the first Text feature)."
)
_TOKENIZER_DIR = flags.DEFINE_string("tokenizer_dir", None, "Directory a Tokenizer was saved to.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where shards and metadata.json go.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 512, "Tokens per example.")
_SENTENCE_TASK = flags.DEFINE_enum(
    "sentence_task", "sop", list(SENTENCE_TASKS), "Sentence-level task."
)
_PACKING = flags.DEFINE_enum(
    "packing",
    "doc_sentences",
    list(PACKINGS),
    "With --sentence_task=none: fill each input within one document (doc_sentences) "
    "or run on across documents with a [SEP] between them (full_sentences), as RoBERTa.",
)
_TASK_BYTES = flags.DEFINE_integer(
    "task_bytes",
    TASK_BYTES,
    "Bytes of an uncompressed input file per task (the unit of parallel work and of "
    "resumption); a multiple of --pool_bytes. Memory does not depend on it.",
)
_POOL_BYTES = flags.DEFINE_integer(
    "pool_bytes",
    POOL_BYTES,
    "Documents starting in the same this-many bytes of a file form a pool: NSP's "
    "random other documents and full_sentences packing stay inside it.",
)
_SHORT_SEQ_PROB = flags.DEFINE_float(
    "short_seq_prob", 0.1, "Probability of a shorter random target length."
)
_DUPE_FACTOR = flags.DEFINE_integer(
    "dupe_factor", 10, "Passes over the data, each with different pairs."
)
_NUM_SHARDS = flags.DEFINE_integer("num_shards", 16, "Output TFRecord files.")
_SEED = flags.DEFINE_integer("seed", 12345, "Random seed.")
_NUM_WORKERS = flags.DEFINE_integer(
    "num_workers", 1, "Processes (parallel over tasks: byte ranges of files, tfds slices)."
)
_RUNNER = flags.DEFINE_string(
    "runner",
    None,
    "Run as an Apache Beam pipeline on this runner: DirectRunner, DataflowRunner, "
    "FlinkRunner, SparkRunner, PortableRunner or any other Beam runner name (needs "
    "pip install -e '.[beam]'). Default: --num_workers processes on this machine.",
)
_BEAM_PIPELINE_OPTIONS = flags.DEFINE_string(
    "beam_pipeline_options",
    "",
    "With --runner: further Beam pipeline options in one string, split like a shell "
    'command, e.g. "--direct_num_workers=2 --direct_running_mode=multi_processing" or '
    '"--project=P --region=R --temp_location=gs://B/tmp".',
)
_CHINESE_SEGMENTER = flags.DEFINE_enum(
    "chinese_wwm_segmenter",
    None,
    ["jieba"],
    "Chinese whole-word masking: segment words with this (needs `pip install jieba`).",
)


def main() -> None:
    if bool(_INPUT.value) == bool(_TFDS_NAME.value):
        raise UserError("give exactly one of --input or --tfds_name")
    common = dict(
        output_dir=_OUTPUT_DIR.value,
        inputs=_INPUT.value or None,
        tfds_name=_TFDS_NAME.value,
        tfds_split=_TFDS_SPLIT.value,
        tfds_data_dir=_TFDS_DATA_DIR.value,
        tfds_text_key=_TFDS_TEXT_KEY.value,
        max_seq_length=_MAX_SEQ_LENGTH.value,
        sentence_task=_SENTENCE_TASK.value,
        packing=_PACKING.value,
        short_seq_prob=_SHORT_SEQ_PROB.value,
        dupe_factor=_DUPE_FACTOR.value,
        num_shards=_NUM_SHARDS.value,
        seed=_SEED.value,
        chinese_segmenter=_CHINESE_SEGMENTER.value,
        task_bytes=_TASK_BYTES.value,
        pool_bytes=_POOL_BYTES.value,
    )
    if _RUNNER.value is None:
        if _BEAM_PIPELINE_OPTIONS.value:
            raise UserError("--beam_pipeline_options needs --runner")
        from albert_tf.data.shards import write_pretraining_data

        write_pretraining_data(
            tokenizer=_TOKENIZER_DIR.value, num_workers=_NUM_WORKERS.value, **common
        )
        return
    if _NUM_WORKERS.value != 1:
        # Silently ignoring it would suggest it did something.
        raise UserError(
            "--num_workers is for the local processes; with --runner give the runner's "
            'own options, e.g. --beam_pipeline_options="--direct_num_workers=2"'
        )
    if importlib.util.find_spec("apache_beam") is None:
        raise UserError("apache-beam is not installed: pip install -e '.[beam]'")
    from albert_tf.data.shards.beam import run_beam_pipeline

    run_beam_pipeline(
        tokenizer_dir=_TOKENIZER_DIR.value,
        runner=_RUNNER.value,
        pipeline_args=shlex.split(_BEAM_PIPELINE_OPTIONS.value),
        **common,
    )


def run() -> None:
    """The `albert-create-pretraining-data` console script."""
    runner.run(main, "create_pretraining_data", required=["tokenizer_dir", "output_dir"])


if __name__ == "__main__":
    run()
