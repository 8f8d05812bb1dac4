"""SentencePiece's ``ModelProto`` in protobuf's wire format, without its Python bindings.

sentencepiece's generated ``sentencepiece_model_pb2`` needs protobuf 7, and
Beam pins protobuf 6 (BUILD.md), so code that edits a model proto (the LiteRT
export's character models, the benchmarks' padded vocabularies) reads and
writes the few fields it needs by hand.

>>> entry = piece_entry("[unused9]", 0.0, CONTROL)
>>> [number for number, _ in proto_fields(field_payload(entry))]
[1, 2, 3]
"""

from __future__ import annotations

import struct

#: ``ModelProto.SentencePiece.Type`` values.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``data[pos:]`` and the position after it."""
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def proto_fields(data: bytes) -> list[tuple[int, bytes]]:
    """Top-level ``(field number, raw bytes incl. tag)`` of a serialized message."""
    fields, pos = [], 0
    while pos < len(data):
        start = pos
        key, pos = read_varint(data, pos)
        wire_type = key & 7
        if wire_type == 0:
            _, pos = read_varint(data, pos)
        elif wire_type == 2:
            size, pos = read_varint(data, pos)
            pos += size
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
        fields.append((key >> 3, data[start:pos]))
    return fields


def field_payload(raw: bytes) -> bytes:
    """The payload of one length-delimited field (as `proto_fields` returns it)."""
    _, pos = read_varint(raw, 0)
    size, pos = read_varint(raw, pos)
    return raw[pos : pos + size]


def length_delimited(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def piece_entry(text: str, score: float, kind: int) -> bytes:
    """One ``ModelProto.pieces`` entry (piece 1, score 2, type 3) as field 1.

    Repeated fields concatenate, so appending it to a serialized model appends
    a piece."""
    body = length_delimited(1, text.encode()) + b"\x15" + struct.pack("<f", score)
    return length_delimited(1, body + varint(3 << 3) + varint(kind))


def compiled_rules(rules: list[tuple[str, str]]) -> list[bytes]:
    """``rules`` ((characters, what they become)) compiled by SentencePiece into a
    ``NormalizerSpec.precompiled_charsmap`` field (number 2), ready to splice."""
    import sentencepiece as spm

    compiled = spm.SentencePieceNormalizer(
        norm_map=rules,
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=False,
    )
    return [raw for n, raw in proto_fields(compiled.serialized_normalizer_spec()) if n == 2]


def with_normalization_rules(model_proto: bytes, rules: list[tuple[str, str]], name: str) -> bytes:
    """``model_proto`` whose normaliser applies ``rules`` ((characters, what they
    become), in full: the model's own rules are replaced) under the name ``name``;
    the rest of its normaliser settings are kept."""
    charsmap = compiled_rules(rules)
    out = b""
    for number, raw in proto_fields(model_proto):
        if number == 3:  # ModelProto.normalizer_spec: swap name (1) and charsmap (2)
            spec = [r for n, r in proto_fields(field_payload(raw)) if n not in (1, 2)]
            payload = length_delimited(1, name.encode()) + b"".join(charsmap + spec)
            raw = length_delimited(3, payload)
        out += raw
    return out


def user_defined_pieces(model_proto: bytes) -> set[str]:
    """The model's user-defined pieces: SentencePiece matches them before its
    normaliser runs, so normalisation rules do not reach their characters."""
    found = set()
    for number, raw in proto_fields(model_proto):
        if number != 1:
            continue
        fields = dict(proto_fields(field_payload(raw)))
        kind = read_varint(fields[3], 1)[0] if 3 in fields else NORMAL
        if kind == USER_DEFINED:
            found.add(field_payload(fields[1]).decode("utf-8"))
    return found
