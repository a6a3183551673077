"""Scraping the broker's Prometheus endpoint and reading samples from it."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Scrape:
    """One scrape of /metrics: family names as their TYPE lines give them, and every sample."""

    types: dict[str, str] = field(default_factory=dict)
    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float | None:
        for got, value in self.samples.get(name, []):
            if got == labels:
                return value
        return None

    def count(self, name: str, **labels: str) -> float:
        """A counter's value; a label set never incremented is absent from the scrape, i.e. 0."""
        return self.value(name, **labels) or 0.0

    def by_label(self, name: str, label: str) -> dict[str, float]:
        return {got[label]: value for got, value in self.samples.get(name, []) if label in got}


def scrape(port: int) -> Scrape:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    out = Scrape()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            out.types[name] = kind
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def requests_answered(port: int, api: str) -> float:
    """Requests of ``api`` the broker has received since it started, all versions."""
    return sum(v for labels, v in scrape(port).samples.get("kcoord_requests_total", []) if labels.get("api") == api)
