"""The layers hold at package level, as the imports draw them (imports inside functions and under
``TYPE_CHECKING`` included):

- the coordinator cores (group, transaction and share coordinators, share partitions) import
  nothing of the broker but the runtime's timer requests: no trio, no I/O, no service;
- ``broker/observability/`` is a leaf (logs, the metrics registry, its HTTP endpoint): services
  register their collectors with it, it imports none of them;
- no two packages of the tree import each other, directly or round a circle: the top-level
  packages, the broker's packages and the broker's own root modules (``app``, ``apis``,
  ``server`` above everything, ``config``, ``features``, ``heap`` below) each count as one.
  Two circles inside a package family are known and listed (``KNOWN_CIRCLES``) until their
  modules move: a new one fails here."""

from __future__ import annotations

import pytest

from tests.unit.layout.import_graph import collapse, cycles, import_graph, modules_of

CORES = ("broker.group_coordinator", "broker.txn_coordinator", "broker.share_coordinator", "broker.share_partition")
CORES_MAY_IMPORT = ("broker.runtime.timer_requests",)

# Circles between a package and its own subpackages, where modules of the parent sit both below
# and above the subpackage: protocol's schema and codec under its messages, the records of the
# internal topics and the stub generator over them; the group coordinator's shared state and
# results under its consumer, share and streams groups, its shard over them.
KNOWN_CIRCLES = [
    ["broker.group_coordinator", "broker.group_coordinator.consumer", "broker.group_coordinator.consumer.assignors",
     "broker.group_coordinator.share", "broker.group_coordinator.streams"],
    ["protocol", "protocol.messages"],
]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def directory_units() -> dict[str, str]:
    """Each module's package (its directory); the broker's root modules count alone."""
    units: dict[str, str] = {}
    for module, (_, is_package) in modules_of().items():
        package = module if is_package else module.rpartition(".")[0] or module
        units[module] = module if package == "broker" else package
    return units


@pytest.mark.parametrize("core", CORES)
def test_the_cores_import_nothing_of_the_broker_but_the_timer_requests(
        graph: dict[str, set[str]], core: str) -> None:
    found = {module: sorted(t for t in targets if t.startswith("broker.") and not _within(t, core)
                            and not t.startswith(CORES_MAY_IMPORT))
             for module, targets in graph.items() if _within(module, core)}
    assert found
    assert {m: t for m, t in found.items() if t} == {}


def test_observability_is_a_leaf(graph: dict[str, set[str]]) -> None:
    found = {module: sorted(t for t in targets if not _within(t, "broker.observability"))
             for module, targets in graph.items() if _within(module, "broker.observability")}
    assert found
    assert {m: t for m, t in found.items() if t} == {}


def test_no_package_circle_but_the_known_ones(graph: dict[str, set[str]]) -> None:
    assert sorted(cycles(collapse(graph, directory_units()))) == sorted(KNOWN_CIRCLES)


def test_the_broker_packages_form_no_circle(graph: dict[str, set[str]]) -> None:
    """Each top-level package, and each package of the broker with its subpackages, as one."""
    units = {m: ".".join(m.split(".")[:2]) if m.startswith("broker.") else m.split(".")[0] for m in graph}
    assert cycles(collapse(graph, units)) == []


def test_a_circle_between_packages_is_seen() -> None:
    graph = {"a.x": {"b.y"}, "b.y": {"a.z"}, "a.z": set()}
    assert cycles(collapse(graph, {"a.x": "a", "a.z": "a", "b.y": "b"})) == [["a", "b"]]
