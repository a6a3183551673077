"""The layers hold at package level, as the imports draw them (imports inside functions and under
``TYPE_CHECKING`` included):

- the coordinator cores (group, transaction and share coordinators, share partitions) import
  nothing of the broker but the runtime's timer requests: no trio, no I/O, no service;
- ``broker/observability/`` is a leaf (logs, the metrics registry, its HTTP endpoint): services
  register their collectors with it, it imports none of them;
- no two packages of the tree import each other, directly or round a circle: every directory
  counts as one (a package's own modules, without its subpackages), and the broker's root modules
  (``app``, ``apis``, ``server`` above everything, ``features``, ``heap`` below) each count alone;
  and again with each package of the broker whole (``broker.coordinators.<kind>`` for the
  coordinators), its subpackages in it."""

from __future__ import annotations

import pytest

from tests.unit.layout.import_graph import collapse, cycles, import_graph, modules_of

CORES = ("broker.coordinators.group.core", "broker.coordinators.transaction.core",
         "broker.coordinators.share.core", "broker.share_partitions.core")
CORES_MAY_IMPORT = ("broker.runtime.timer_requests",)


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


def test_no_directory_imports_another_round_a_circle(graph: dict[str, set[str]]) -> None:
    assert cycles(collapse(graph, directory_units())) == []


def test_the_broker_packages_form_no_circle(graph: dict[str, set[str]]) -> None:
    """Each top-level package, and each package of the broker with its subpackages, as one."""
    def unit(module: str) -> str:
        parts = module.split(".")
        if parts[0] != "broker":
            return parts[0]
        return ".".join(parts[:3] if parts[1:2] == ["coordinators"] else parts[:2])

    units = {m: unit(m) for m in graph}
    assert cycles(collapse(graph, units)) == []


def test_a_circle_between_packages_is_seen() -> None:
    graph = {"a.x": {"b.y"}, "b.y": {"a.z"}, "a.z": set()}
    assert cycles(collapse(graph, {"a.x": "a", "a.z": "a", "b.y": "b"})) == [["a", "b"]]
