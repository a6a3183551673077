"""The lag series' text, rendered in pieces with label text kept between scrapes, reads back (through
prometheus_client's parser) as exactly what prometheus_client's own exposition writes for the same
gauges: names, labels, values, escaping and Go's float formatting."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from broker.coordinators.group.service.lag_metrics import Family, _LabelText, render_pieces

LABELS = ("consumergroup", "topic", "partition")


class _Fixed(Collector):
    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self):  # type: ignore[no-untyped-def]
        for name, doc, labels, samples in self.families:
            family = GaugeMetricFamily(name, doc, labels=list(labels))
            for values, value in samples:
                family.add_metric(list(values), value)
            yield family


Read = list[tuple[str, str, list[tuple[str, tuple[tuple[str, str], ...], str]]]]


def read(text: str) -> Read:
    """Each family's name, help and samples (labels in name order, the value as written)."""
    out: Read = []
    for family in text_string_to_metric_families(text):
        rows = [(s.name, tuple(sorted(s.labels.items())), repr(s.value)) for s in family.samples]
        out.append((family.name, family.documentation, rows))
    return out


def reference(families: list[Family]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    return generate_latest(registry).decode()


def value_texts(text: str) -> list[str]:
    return [line.rsplit(" ", 1)[1] for line in text.splitlines() if not line.startswith("#")]


label_value = st.text(st.sampled_from('ab-_.0"\\\n\u00e9'), max_size=6)
value = st.one_of(st.integers(-10**18, 10**18), st.integers(-10**7, 10**7), st.integers(-10**18, 10**18).map(float),
                  st.floats(allow_nan=False),
                  st.sampled_from([float("inf"), float("-inf"), 0.0, 1e6, 123456.0, 1234567.0]))
samples = st.lists(st.tuples(st.tuples(label_value, label_value, st.integers(0, 999).map(str)), value),
                   max_size=40, unique_by=lambda s: s[0])


@settings(max_examples=200, deadline=None)
@given(samples, samples)
def test_pieces_are_the_reference_exposition_scrape_after_scrape(first: list[tuple[tuple[str, ...], float]],
                                                                  second: list[tuple[tuple[str, ...], float]]) -> None:
    kept = _LabelText()
    for rows in (first, second, first):  # the second and third scrapes reuse and drop kept label text
        families: list[Family] = [("kafka_consumergroup_lag", "Lag.", LABELS, rows),
                                  ("kcoord_lag_partitions_omitted", "Omitted.", (), [((), 3)])]
        kept.start()
        text = "".join(render_pieces(families, kept))
        assert read(text) == read(reference(families))
        assert value_texts(text) == value_texts(reference(families))  # Go's formatting, +Inf, exponents
        assert set(kept.used["kafka_consumergroup_lag"]) == {values for values, _ in rows}


def test_many_samples_come_in_bounded_pieces() -> None:
    rows: list[tuple[tuple[str, ...], float]] = [((f"g{i}", "t", str(i % 7)), float(i)) for i in range(1000)]
    families: list[Family] = [("kafka_consumergroup_lag", "Lag.", LABELS, rows)]
    pieces = list(render_pieces(families))
    assert len(pieces) >= 5
    assert max(p.count("\n") for p in pieces) <= 202  # HELP and TYPE lines ride on the first piece
    assert read("".join(pieces)) == read(reference(families))
