"""kafka-python's own integration suite, unchanged, against kcoord (docs/client-suites.md)."""

from __future__ import annotations

from pathlib import Path

from testkit import client_suites


def test_kafka_pythons_integration_suite_passes_against_kcoord(tmp_path: Path) -> None:
    # The SSL tests start a Kafka of their own (errors here, whatever the broker); the SASL ones
    # skip on an external broker, as does one for brokers before 0.10.1.
    # A failed test is run once more (client_suites.MAX_RETRIED: a race of kafka-python's own).
    result = client_suites.run(["--deselect", "test/integration/test_ssl_integration.py"], tmp_path)
    counts = client_suites.summary(result.output)
    assert counts.get("error", 0) == 0, result.report
    assert counts.get("failed", 0) == len(result.retried), result.report
    assert counts.get("passed", 0) + len(result.retried) >= 55, result.report
    assert result.retry_code == 0, result.report
    if not result.retried:
        assert result.code == 0, result.report
