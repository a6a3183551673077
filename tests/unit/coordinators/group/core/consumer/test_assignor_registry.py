"""The assignors the coordinator offers, by the names clients ask for."""

from __future__ import annotations

from broker.coordinators.group.core.consumer.assignors import ASSIGNORS, DEFAULT_ASSIGNOR


def test_kafkas_two_assignors_are_offered_under_their_own_names() -> None:
    assert sorted(ASSIGNORS) == ["range", "uniform"]
    assert all(assignor.name == name for name, assignor in ASSIGNORS.items())


def test_uniform_is_the_default() -> None:
    assert DEFAULT_ASSIGNOR == "uniform"
    assert DEFAULT_ASSIGNOR in ASSIGNORS
