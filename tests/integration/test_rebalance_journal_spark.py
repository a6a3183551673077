"""`kcoord analyze` reads the rebalance journal beside `__consumer_offsets`: the `rebalances` table
holds each scenario's rebalance with the cause and the stall the clients saw, the `doctor` table
its findings (a streams group held NotReady by a missing source topic among them), and the report
shows the stalls and the findings."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the analysis tests need the analysis extra (pyspark)")
pytest.importorskip("pyarrow", reason="Python data sources need pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)", allow_module_level=True)

from analytics.job import AnalyzeOptions, analyze
from kclient.wire_client import WireClient
from testkit.kcoord import BrokerProcess
from tests.differential.streams_ops import Member
from tests.integration.helpers.journal import (
    member_closing_with_a_reason,
    member_killed_with_sigkill,
    member_stops_polling,
    partition_count_change,
    stall_matches,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]


def test_the_rebalances_and_doctor_tables(broker: BrokerProcess, spark: Any, tmp_path: Any) -> None:
    seen = [member_closing_with_a_reason(broker), member_killed_with_sigkill(broker), member_stops_polling(broker),
            partition_count_change(broker)]
    # A streams group whose source topic does not exist: NotReady, a finding of its own.
    with WireClient("127.0.0.1", broker.port) as conn:
        answer = Member(conn, "streams-g", "no-such-topic", "a").heartbeat()
        assert 1 in [s.status_code for s in answer.status or []]  # MISSING_SOURCE_TOPICS
    assert broker.stop() == 0  # a clean stop: every journal event is on disk
    out = tmp_path / "report"
    result = analyze(spark, AnalyzeOptions(data_dir=str(broker.data_dir), out=str(out)))
    rows = [r.asDict() for r in spark.read.parquet(str(out / "rebalances")).collect()]
    findings = [r.asDict() for r in spark.read.parquet(str(out / "doctor")).collect()]
    for s in seen:
        mine = sorted((r for r in rows if r["group"] == s.group and r["cause"] == s.cause),
                      key=lambda r: r["started_ms"])
        assert mine, (s, [(r["group"], r["cause"]) for r in rows])
        if s.client_stall_ms is not None:
            assert stall_matches(mine[-1]["stall_ms"], s.client_stall_ms), (s, mine[-1])
    close = next(r for r in rows if r["group"] == "close-g" and r["cause"] == "member-left")
    assert close["client_reason"] == "deploying version 2" and close["moved_count"] == 2
    assert result.tables["rebalances"] == len(rows) and result.tables["doctor"] == len(findings)
    # Eager rebalances (librdkafka's default assignors) that moved only some partitions: a finding with its fix.
    eager = [f for f in findings if f["rule"] == "eager-rebalances"]
    assert eager and "cooperative-sticky" in eager[0]["recommendation"], findings
    [not_ready] = [f for f in findings if f["rule"] == "streams-not-ready"]
    assert not_ready["group"] == "streams-g" and "Source topics no-such-topic are missing." in not_ready["evidence"]
    html = (out / "report.html").read_text()
    assert "id='stalls'" in html and "id='doctor'" in html and "cooperative-sticky" in html
