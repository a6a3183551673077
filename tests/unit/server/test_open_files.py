"""The broker raises its soft limit on open files to the hard one: one descriptor per connection."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from broker.server import raise_open_files_limit


@pytest.fixture
def limits() -> Iterator[tuple[int, int]]:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield before
    resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_soft_limit_is_raised_to_the_hard_one(limits: tuple[int, int]) -> None:
    soft, hard = limits
    if hard == resource.RLIM_INFINITY or hard < 64:
        pytest.skip("needs a finite hard limit")
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 32), hard))
    assert raise_open_files_limit() == hard
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
