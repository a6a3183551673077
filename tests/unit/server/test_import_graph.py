"""The modules of ``broker/`` import each other without a cycle: every import counts, at module
level, under ``if TYPE_CHECKING:`` and inside functions."""

from __future__ import annotations

from tests.unit.layout.import_graph import cycles
from tests.unit.layout.import_graph import import_graph as project_graph


def import_graph() -> dict[str, set[str]]:
    """Module -> the broker modules it imports."""
    return project_graph(("broker",))


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    # A module-level import, one under TYPE_CHECKING and one inside a function.
    assert "broker.network.router" in graph["broker.handlers.groups"]
    assert "broker.security.sasl" in graph["broker.network.router"]
    assert "broker.coordinators.group.core.consumer.assignors" in graph["broker.configs.node_config"]


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_broker_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_handlers_are_built_by_the_root_and_do_not_reach_back() -> None:
    graph = import_graph()
    root = {"broker.app", "broker.apis", "broker.server"}
    for module, targets in graph.items():
        if module.startswith(("broker.handlers", "broker.security", "broker.network")):
            assert not targets & root, module
    assert {m for m, targets in graph.items() if "broker.app" in targets} == {"broker.server"}
    assert {m for m, targets in graph.items() if "broker.apis" in targets} == {"broker.app"}
