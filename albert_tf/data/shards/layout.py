"""The on-disk layout of a preparation's output directory, in one place.

::

    output_dir/
      pretrain-00000-of-000NN.tfrecord   the shards (each appears whole, renamed)
      masking_vocab.json                 what the input pipeline needs to mask
      metadata.json                      written last: the shards are complete
      .parts/                            the local runner's work, removed at the end
        plan.json                          the fingerprint resumption checks
        {shard:05d}.{task:06d}             one task's examples for one shard
        done-{task:06d}.json               a finished task's counts
      .beam_parts/                       the Beam runner's part files

Every name and every rule of that picture (what "complete" means, the order of
the final writes) lives here; the runners call these functions.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence

from albert_tf import storage

SHARD_PATTERN = "pretrain-{index:05d}-of-{count:05d}.tfrecord"
METADATA_FILE = "metadata.json"
#: The local runner's part files, done markers and plan (kept across interruptions).
LOCAL_PARTS = ".parts"
#: The Beam runner's part files (a Beam run is redone whole).
BEAM_PARTS = ".beam_parts"


def shard_paths(output_dir: str, num_shards: int) -> list[str]:
    """The shard files of a preparation into ``num_shards``, in order."""
    return [
        os.path.join(output_dir, SHARD_PATTERN.format(index=s, count=num_shards))
        for s in range(num_shards)
    ]


def part_path(parts_dir: str, shard: int, task_index: int) -> str:
    """Where task ``task_index`` writes its examples for shard ``shard``."""
    return os.path.join(parts_dir, f"{shard:05d}.{task_index:06d}")


def marker_path(parts_dir: str, task_index: int) -> str:
    """A finished task's counts; its presence says the task's parts are whole."""
    return os.path.join(parts_dir, f"done-{task_index:06d}.json")


def plan_path(parts_dir: str) -> str:
    """The fingerprint of the preparation whose parts ``parts_dir`` holds."""
    return os.path.join(parts_dir, "plan.json")


def concatenate_parts(parts_dir: str, shard: int, task_indices: Sequence[int], path: str) -> None:
    """Writes shard ``path`` from its parts, in the order of ``task_indices``
    (TFRecord files concatenate byte-wise). The shard gets its final name only
    once it is whole, so a shard file that exists is complete."""
    with storage.open_file(path + ".partial", "wb") as out:
        for index in task_indices:
            with storage.open_file(part_path(parts_dir, shard, index), "rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 22)
    storage.replace(path + ".partial", path)


def prepare_output_dir(output_dir: str) -> None:
    """Creates ``output_dir``; an unwritable one is an error before any work."""
    if storage.is_remote(output_dir):
        storage.makedirs(output_dir)  # object storage: permissions show on the first write
        return
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as e:
        raise OSError(
            f"cannot create the output directory {output_dir} ({e.strerror}); "
            "choose another --output_dir or fix its permissions"
        ) from None
    if not os.access(output_dir, os.W_OK | os.X_OK):
        raise PermissionError(
            f"the output directory {output_dir} is not writable; choose another "
            "--output_dir or fix its permissions"
        )


def withdraw_completion(output_dir: str) -> None:
    """From here on the directory does not claim to hold complete shards: its
    metadata and any earlier shards go (a new run may write fewer shards)."""
    meta_path = os.path.join(output_dir, METADATA_FILE)
    if storage.exists(meta_path):
        storage.remove(meta_path)
    for old in storage.glob(os.path.join(output_dir, "pretrain-*-of-*.tfrecord")):
        storage.remove(old)


def write_metadata(output_dir: str, metadata: dict) -> None:
    """Writes ``metadata.json``, atomically; call it last: with it the shards are complete."""
    storage.write_json_atomic(os.path.join(output_dir, METADATA_FILE), metadata)


def read_metadata(directory: str) -> dict | None:
    """The ``metadata.json`` a preparation wrote, or None."""
    path = os.path.join(directory, METADATA_FILE)
    if not storage.isfile(path):
        return None
    with storage.open_file(path, "r") as fh:
        return json.load(fh)
