"""The records the coordinator emits and replays are the ``__consumer_offsets`` records, defined
with their bytes in ``protocol.payloads.offsets_log_records``; this name keeps the coordinator's modules
importing them from beside themselves."""

from protocol.payloads.offsets_log_records import (
    AnyRecord,
    ConsumerGroupRecord,
    GroupMetadataRecord,
    OffsetCommitRecord,
    Record,
    decode_record,
    encode_offset_commit,
    encode_record,
    encode_record_generic,
)

__all__ = [
    "AnyRecord",
    "ConsumerGroupRecord",
    "GroupMetadataRecord",
    "OffsetCommitRecord",
    "Record",
    "decode_record",
    "encode_offset_commit",
    "encode_record",
    "encode_record_generic",
]
