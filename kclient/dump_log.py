"""`kcoord dump-log`: segment files printed like `kafka-dump-log.sh --offsets-decoder`.

Reads kcoord's segments and a Kafka broker's alike (same bytes). Damage is reported where it
starts and the rest of that file is skipped; other files are still dumped. Segments of a topic
partition (a ``<topic>-<partition>`` directory other than ``__consumer_offsets-N``) hold plain
records: their keys, values and headers are shown as text, not decoded as offsets records.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from protocol.errors import DecodeError
from protocol.messages.transaction_log import TransactionLogValue
from protocol.payloads.offsets_log_records import read_record, value_message
from protocol.payloads.transaction_log_records import TRANSACTION_STATE_TOPIC, decode_transaction_record
from protocol.record import Record
from protocol.record_batch import (
    CorruptBatchError,
    RecordBatch,
    decode_records,
    iter_batches,
    parse_end_txn_marker,
)
from protocol.schema import UUID, Field, Primitive, Struct
from storage.checkpoints import topic_id_to_str
from storage.layout import OFFSETS_TOPIC, parse_partition_dir

_CODECS = {0: "NONE", 1: "GZIP", 2: "SNAPPY", 3: "LZ4", 4: "ZSTD"}
# How a process killed by SIGPIPE exits: what `kcoord dump-log ... | head` would get from a C tool.
_BROKEN_PIPE_STATUS = 128 + 13


def decode_key_value(key: bytes | None, value: bytes | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Kafka's offsets decoder output: ``{"type": key version, "data": {...}}`` and
    ``{"version": value version, "data": {...}}`` (None for a tombstone). A value written in a
    version newer than kcoord knows also says which layout it was read with (``readAs``)."""
    if key is None or len(key) < 2:
        return None, None
    rec = read_record(key, value)
    if rec.key is None:
        what = "unknown record type" if rec.type_name is None else f"{rec.type_name} record, not decoded"
        return {"type": str(rec.key_version), "data": what}, None
    key_out = {"type": str(rec.key_version), "data": _jsonable(rec.key.to_dict())}
    if rec.value is None or rec.value_version is None:
        return key_out, None
    message = value_message(rec.key_version)
    assert message is not None  # a decoded value has a table
    payload = {"version": str(rec.value_version), "data": _fields_json(message.fields, rec.value)}
    if rec.newer_than_known:
        payload["readAs"] = str(rec.read_as)
    return key_out, payload


def _fields_json(fields: list[Field], obj: Any) -> dict[str, Any]:
    """A struct as JSON: topic ids (uuid fields) as Kafka prints them (URL-safe base64, 22
    characters), other bytes as hex."""
    out: dict[str, Any] = {}
    for fl in fields:
        value = getattr(obj, fl.name)
        if value is None:
            out[fl.name] = None
        elif isinstance(fl.type, Struct):
            sub = fl.type.fields
            out[fl.name] = [_fields_json(sub, v) for v in value] if fl.type.many else _fields_json(sub, value)
        elif isinstance(fl.type, Primitive) and fl.type == UUID:
            out[fl.name] = topic_id_to_str(value)
        else:
            out[fl.name] = _jsonable(value)
    return out


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    return obj


def _batch_info(batch: RecordBatch) -> dict[str, Any]:
    last_seq = batch.base_sequence + batch.last_offset_delta if batch.base_sequence >= 0 else -1
    return {
        "baseOffset": batch.base_offset, "lastOffset": batch.last_offset, "count": batch.records_count,
        "baseSequence": batch.base_sequence, "lastSequence": last_seq, "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch, "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional, "isControl": batch.is_control,
        "deleteHorizonMs": batch.delete_horizon_ms, "position": batch.position,
        "CreateTime" if not batch.log_append_time else "LogAppendTime": batch.max_timestamp,
        "size": batch.size, "magic": batch.magic, "compresscodec": _CODECS.get(batch.compression, "UNKNOWN"),
        "crc": batch.crc, "isvalid": True,
    }


def is_topic_partition_segment(path: Path) -> bool:
    """Whether ``path`` lies in a topic partition's directory (not ``__consumer_offsets``'s nor
    ``__transaction_state``'s); a segment anywhere else is taken to be an offsets log, as the tool
    always did."""
    parsed = parse_partition_dir(path.parent.name)
    return parsed is not None and parsed[0] not in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


def is_transaction_log_segment(path: Path) -> bool:
    parsed = parse_partition_dir(path.parent.name)
    return parsed is not None and parsed[0] == TRANSACTION_STATE_TOPIC


def transaction_record_fields(rec: Record) -> dict[str, Any]:
    """A ``__transaction_state`` record: the transactional id and the metadata (None for a tombstone)."""
    if rec.key is None:
        return {"key": None, "payload": None}
    try:
        decoded = decode_transaction_record(rec.key, rec.value)
    except DecodeError as exc:
        return {"key": None, "payload": f"undecodable: {exc}"}
    key = {"type": "0", "data": {"transactionalId": decoded.transactional_id}}
    if decoded.value is None:
        return {"key": key, "payload": None}
    data = _fields_json(TransactionLogValue.fields, decoded.value)
    data["transaction_status_name"] = _STATUS_NAMES.get(decoded.value.transaction_status, "Unknown")
    return {"key": key, "payload": {"version": str(decoded.version), "data": data}}


_STATUS_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def _text_of(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def plain_record_fields(rec: Record) -> dict[str, Any]:
    """A topic's record as kafka-dump-log.sh --print-data-log shows it: key, value, headers."""
    return {"key": _text_of(rec.key), "payload": _text_of(rec.value),
            "headers": [[k, _text_of(v)] for k, v in rec.headers]}


def offsets_record_fields(rec: Record) -> dict[str, Any]:
    """An ``__consumer_offsets`` record, key and value decoded."""
    try:
        key, payload = decode_key_value(rec.key, rec.value)
    except DecodeError as exc:
        return {"key": None, "payload": f"undecodable: {exc}"}
    return {"key": key, "payload": payload}


def dump_file(path: Path) -> Iterator[dict[str, Any]]:
    """One dict per batch (with its records), then one ``{"error": ...}`` if the file is damaged."""
    record_fields = (plain_record_fields if is_topic_partition_segment(path) else
                     transaction_record_fields if is_transaction_log_segment(path) else offsets_record_fields)
    data = path.read_bytes()
    try:
        for batch in iter_batches(data):
            info = _batch_info(batch)
            records = []
            for rec in decode_records(batch):
                entry: dict[str, Any] = {
                    "offset": batch.base_offset + rec.offset_delta,
                    "CreateTime": batch.base_timestamp + rec.timestamp_delta,
                    "keySize": -1 if rec.key is None else len(rec.key),
                    "valueSize": -1 if rec.value is None else len(rec.value),
                    "sequence": _sequence(batch.base_sequence, rec.offset_delta),
                    "headerKeys": [k for k, _ in rec.headers],
                }
                if not batch.is_control:
                    entry.update(record_fields(rec))
                else:
                    try:
                        marker = parse_end_txn_marker(rec)
                        entry["endTxnMarker"] = marker.control_type.name
                        entry["coordinatorEpoch"] = marker.coordinator_epoch
                    except CorruptBatchError:
                        pass  # another kind of control record
                records.append(entry)
            info["records"] = records
            yield info
    except CorruptBatchError as exc:
        yield {"error": str(exc), "position": exc.position, "kind": exc.kind}


def _sequence(base_sequence: int, offset_delta: int) -> int:
    """A record's producer sequence: its batch's base sequence plus its offset delta, wrapping
    past 2^31 - 1 to 0 as producers do; -1 in a batch without sequences."""
    if base_sequence < 0:
        return -1
    return (base_sequence + offset_delta) % (1 << 31)


def _print_text(path: Path, out: TextIO) -> None:
    out.write(f"Dumping {path}\n")
    if path.suffix == ".log":
        out.write(f"Log starting offset: {int(path.stem) if path.stem.isdigit() else 0}\n")
    for item in dump_file(path):
        if "error" in item:
            out.write(f"Found invalid data at position {item['position']}: {item['error']} "
                      f"({item['kind']}); the rest of this file is skipped\n")
            continue
        records = item.pop("records")
        # As Kafka's tool prints them: its codec names in lower case, an absent delete horizon as
        # the Java OptionalLong it is.
        item["compresscodec"] = str(item["compresscodec"]).lower()
        horizon = item["deleteHorizonMs"]
        item["deleteHorizonMs"] = "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"
        out.write(" ".join(f"{k}: {_text(v)}" for k, v in item.items()) + "\n")
        for rec in records:
            parts = [f"offset: {rec['offset']}", f"CreateTime: {rec['CreateTime']}", f"keySize: {rec['keySize']}",
                     f"valueSize: {rec['valueSize']}", f"sequence: {rec['sequence']}",
                     f"headerKeys: {rec['headerKeys']}"]
            if "key" in rec:
                parts.append(f"key: {json.dumps(rec['key'], separators=(',', ':'))}")
                parts.append(f"payload: {json.dumps(rec['payload'], separators=(',', ':'))}")
            if "endTxnMarker" in rec:
                parts.append(f"endTxnMarker: {rec['endTxnMarker']} coordinatorEpoch: {rec['coordinatorEpoch']}")
            if "headers" in rec:
                parts.append(f"headers: {json.dumps(rec['headers'], separators=(',', ':'))}")
            out.write("| " + " ".join(parts) + "\n")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _files(paths: list[str]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(p.rglob("*.log"))
        else:
            yield p


def run(args: argparse.Namespace) -> int:
    try:
        status = _dump(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of our output went away (``| head``): stop without a traceback. stdout is
    pointed at /dev/null so the interpreter's last flush cannot fail on the pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return _BROKEN_PIPE_STATUS


def _dump(args: argparse.Namespace) -> int:
    status = 0
    for path in _files(args.paths):
        if not path.exists():
            print(f"kcoord dump-log: {path}: no such file", file=sys.stderr)
            status = 1
            continue
        if args.json:
            for item in dump_file(path):
                print(json.dumps({"file": str(path), **item}, separators=(",", ":")))
        else:
            _print_text(path, sys.stdout)
    return status


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dump-log", help="decode segment files of __consumer_offsets and of topics "
                       "(like kafka-dump-log.sh)")
    p.add_argument("paths", nargs="+", help="segment .log files, or directories to search for them")
    p.add_argument("--json", action="store_true", help="one JSON object per batch, for machines")
    p.set_defaults(func=run)
