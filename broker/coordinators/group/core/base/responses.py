"""Response objects shaped for the version of the request they answer."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages.join_group import JoinGroupResponse
from protocol.messages.sync_group import SyncGroupResponse

JOIN_GROUP_NULLABLE_PROTOCOL_NAME = 7


def join_response(
    version: int,
    *,
    error: int = ErrorCode.NONE,
    member_id: str = "",
    generation: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str | None = "",
    skip_assignment: bool = False,
    members: list[JoinGroupResponse.Member] | None = None,
) -> JoinGroupResponse:
    # Like Kafka's JoinGroupResponse: before v7 the protocol name cannot be null, from v7 an empty
    # name is sent as null.
    name: str | None
    if version < JOIN_GROUP_NULLABLE_PROTOCOL_NAME:
        name = protocol_name or ""
    else:
        name = protocol_name or None
    return JoinGroupResponse(
        error_code=int(error),
        generation_id=generation,
        protocol_type=protocol_type,
        protocol_name=name,
        leader=leader or "",
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=list(members or []),
    )


def sync_response(
    error: int = ErrorCode.NONE,
    *,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    assignment: bytes = b"",
) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=int(error),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    )
