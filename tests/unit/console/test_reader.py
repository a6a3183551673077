"""The console's reads keep one admin client between refreshes and make it again after a failure."""

from __future__ import annotations

import pytest

from broker.console import state
from kclient.group_history import JournalTail


class FakeAdmin:
    made: list[FakeAdmin] = []

    def __init__(self, bootstrap: str, timeout: float, client_id: str) -> None:
        self.closed = False
        FakeAdmin.made.append(self)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def admins(monkeypatch: pytest.MonkeyPatch) -> list[FakeAdmin]:
    FakeAdmin.made = []
    monkeypatch.setattr(state, "KafkaAdmin", FakeAdmin)
    return FakeAdmin.made


def test_the_admin_client_is_kept_and_made_again_once_after_a_closed_connection(
        admins: list[FakeAdmin], monkeypatch: pytest.MonkeyPatch) -> None:
    failures = [ConnectionError("connection closed by the broker")]
    seen: list[object] = []

    def read_group(admin: FakeAdmin, group_id: str, journal: JournalTail) -> None:
        seen.append(admin)
        if failures:
            raise failures.pop()

    monkeypatch.setattr(state, "read_group", read_group)
    reader = state.Reader("127.0.0.1:9092")
    assert reader.group("g") is None
    assert len(admins) == 2 and admins[0].closed and seen == admins
    reader.group("g")
    reader.group("g")
    assert len(admins) == 2 and seen[-1] is admins[1]


def test_a_broker_that_stays_unreachable_is_an_error(admins: list[FakeAdmin],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def read_group(admin: FakeAdmin, group_id: str, journal: JournalTail) -> None:
        raise ConnectionRefusedError("refused")

    monkeypatch.setattr(state, "read_group", read_group)
    with pytest.raises(ConnectionRefusedError):
        state.Reader("127.0.0.1:9092").group("g")
    assert len(admins) == 2 and all(a.closed for a in admins)
