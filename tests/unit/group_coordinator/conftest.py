from __future__ import annotations

import pytest

from tests.unit.group_coordinator.harness import Harness


@pytest.fixture
def h() -> Harness:
    return Harness()
