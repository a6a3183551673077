from __future__ import annotations

import pytest

from tests.unit.coordinators.group.core.harness import Harness


@pytest.fixture
def h() -> Harness:
    return Harness()
