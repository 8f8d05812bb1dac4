"""Read Hugging Face weight files, and write safetensors, without PyTorch or the
safetensors package.

PyTorch is a test-only dependency of this package, so the readers and the
writer here use NumPy alone: safetensors is a JSON header followed by raw little-endian
arrays; ``pytorch_model.bin`` is a zip of a pickle whose tensors point at raw
storage files. The unpickler below resolves only the handful of globals a
state dict needs and refuses anything else, so a malicious file cannot run
code.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import zipfile
from collections import OrderedDict
from typing import Any

import ml_dtypes
import numpy as np

_SAFETENSORS_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Arrays of a ``.safetensors`` file (a local path or a bucket URL) by name."""
    from albert_tf import storage

    with storage.open_file(os.fspath(path), "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_size))
        data = f.read()
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]]).newbyteorder("<")
        arrays[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
    return arrays


def write_safetensors(
    path: str | os.PathLike[str], arrays: dict[str, np.ndarray], metadata: dict | None = None
) -> None:
    """Writes ``arrays`` as a ``.safetensors`` file (names sorted, data 8-byte aligned).

    The header's ``__metadata__`` says ``format: pt``, which transformers requires.

    >>> import tempfile; path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
    >>> write_safetensors(path, {"b": np.arange(3, dtype=np.float32), "a": np.eye(2)})
    >>> {k: v.tolist() for k, v in read_safetensors(path).items()}
    {'a': [[1.0, 0.0], [0.0, 1.0]], 'b': [0.0, 1.0, 2.0]}
    """
    from albert_tf import storage

    codes = {np.dtype(v): k for k, v in _SAFETENSORS_DTYPES.items()}
    header: dict = {"__metadata__": {"format": "pt", **(metadata or {})}}
    blobs, offset = [], 0
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        if array.dtype not in codes:
            raise ValueError(f"tensor {name} has dtype {array.dtype}, not one safetensors has")
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {
            "dtype": codes[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)  # the spec allows trailing spaces
    storage.write_bytes(
        os.fspath(path), struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs)
    )


# torch storage class name -> numpy dtype
_TORCH_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": ml_dtypes.bfloat16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _StorageType:
    def __init__(self, name: str):
        if name not in _TORCH_STORAGE_DTYPES:
            raise pickle.UnpicklingError(f"unsupported torch storage {name}")
        self.dtype = np.dtype(_TORCH_STORAGE_DTYPES[name])


def _rebuild_tensor_v2(storage, offset, size, stride, *_unused):
    if not size:
        return storage[offset : offset + 1].reshape(())
    itemsize = storage.dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size), strides=[s * itemsize for s in stride]
    ).copy()


class _StateDictUnpickler(pickle.Unpickler):
    def __init__(self, file, archive: zipfile.ZipFile, prefix: str):
        super().__init__(file)
        self._archive = archive
        self._prefix = prefix

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch" and name.endswith("Storage"):
            return _StorageType(name)
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module == "torch._utils" and name == "_rebuild_parameter":
            return lambda data, *_: data
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name}: not part of a plain state dict"
        )

    def persistent_load(self, pid):
        # ("storage", storage_type, key, location, numel)
        _, storage_type, key, _location, _numel = pid
        raw = self._archive.read(f"{self._prefix}/data/{key}")
        return np.frombuffer(raw, dtype=storage_type.dtype.newbyteorder("<"))


def read_pytorch_bin(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Arrays of a (zip-format, torch ≥ 1.6) ``pytorch_model.bin`` (a local path or
    a bucket URL) by name."""
    from albert_tf import storage

    path = os.fspath(path)
    # zipfile seeks about: a bucket's file is read whole into memory first.
    source = io.BytesIO(storage.read_bytes(path)) if storage.is_remote(path) else path
    if not zipfile.is_zipfile(source):
        raise ValueError(
            f"{path} is a legacy (pre-1.6) torch file; re-save it with a current "
            "PyTorch or convert it to safetensors first."
        )
    with zipfile.ZipFile(source) as archive:
        pkl = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        prefix = pkl[: -len("/data.pkl")]
        with archive.open(pkl) as f:
            state = _StateDictUnpickler(f, archive, prefix).load()
    return {k: np.asarray(v) for k, v in state.items()}
