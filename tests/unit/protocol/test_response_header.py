"""The response-header rule: a flexible version's answer carries a tagged-field block after the
correlation id, except ApiVersions' (KIP-511), whose header is always v0."""

from __future__ import annotations

import pytest

from kclient.wire_client import decode_response
from protocol.errors import DecodeError
from protocol.frames import frame_response, parse_response_header, response_header_size
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.heartbeat import HeartbeatResponse


def test_a_flexible_answer_has_a_tag_block_and_an_api_versions_answer_never_has_one() -> None:
    assert response_header_size(ApiKey.Heartbeat, True) == 5
    assert response_header_size(ApiKey.Heartbeat, False) == 4
    assert response_header_size(ApiKey.ApiVersions, True) == 4


def test_the_body_is_decoded_after_the_header_the_broker_writes() -> None:
    heartbeat = frame_response(7, HeartbeatResponse.encode(HeartbeatResponse(error_code=27), 4), True)
    assert decode_response(ApiKey.Heartbeat, 4, heartbeat[4:]) == (7, HeartbeatResponse(error_code=27))
    versions = ApiVersionsResponse(error_code=35, api_keys=[])
    answer = frame_response(9, ApiVersionsResponse.encode(versions, 3), False)
    corr, body = decode_response(ApiKey.ApiVersions, 3, answer[4:])
    assert (corr, body.error_code) == (9, 35)


def test_tagged_fields_in_a_response_header_are_skipped() -> None:
    # correlation id 1, two tagged fields: tag 0 with 2 bytes, tag 5 with 0 bytes, then the body.
    frame = b"\x00\x00\x00\x01" + b"\x02" + b"\x00\x02ab" + b"\x05\x00" + b"BODY"
    assert parse_response_header(frame, ApiKey.Heartbeat, True) == (1, 11)
    assert parse_response_header(frame, ApiKey.Heartbeat, False) == (1, 4)


def test_a_truncated_tag_block_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        parse_response_header(b"\x00\x00\x00\x01\x01\x00\x09ab", ApiKey.Heartbeat, True)
