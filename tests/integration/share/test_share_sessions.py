"""Share sessions over the wire: epochs, the session limit (group.share.max.share.sessions,
SHARE_SESSION_LIMIT_REACHED) and closing a session to make room."""

from __future__ import annotations

from collections.abc import Callable

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages.share_fetch import ShareFetchRequest
from testkit.kcoord import BrokerProcess


def fetch(c: WireClient, member: str, epoch: int) -> int:
    answer = c.call(78, 1, ShareFetchRequest(group_id="sg", member_id=member, share_session_epoch=epoch,
                                             max_wait_ms=0, min_bytes=0, max_bytes=1024, max_records=10,
                                             batch_size=10, topics=[], forgotten_topics_data=[]))
    code: int = answer.error_code
    return code


def test_session_epochs_and_the_session_limit(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"group.share.max.share.sessions": "1"})
    with WireClient("127.0.0.1", broker.port) as c:
        assert fetch(c, "a", 3) == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert fetch(c, "a", 0) == 0
        assert fetch(c, "a", 2) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert fetch(c, "a", 1) == 0
        assert fetch(c, "b", 0) == ErrorCode.SHARE_SESSION_LIMIT_REACHED
        assert fetch(c, "a", -1) == 0  # closes a's session
        assert fetch(c, "b", 0) == 0
