"""`kcoord dump-log` on a whole data dir: topic partitions show their records as they are,
``__consumer_offsets`` its decoded commits, and a reader that stops early (``| head``) ends the
dump quietly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from analytics.synthetic import commit_record, encode_batch
from protocol.record import Record
from protocol.record_batch import build_batch

ROOT = Path(__file__).resolve().parents[3]
T0 = 1_700_000_000_000


def data_dir(tmp_path: Path, topic_records: int = 2) -> Path:
    offsets = tmp_path / "data" / "__consumer_offsets-7"
    offsets.mkdir(parents=True)
    (offsets / "00000000000000000000.log").write_bytes(encode_batch(0, [commit_record("g", "orders", 0, 42, T0)], T0))
    topic = tmp_path / "data" / "orders-0"
    topic.mkdir()
    records = [Record(i, i, b"order-%d" % i, b"{\"total\": %d}" % i, [("source", b"web")] if i == 0 else [])
               for i in range(topic_records)]
    (topic / "00000000000000000000.log").write_bytes(build_batch(records, 0, base_timestamp=T0))
    return tmp_path / "data"


def dump(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kcoord", "dump-log", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_topic_partitions_are_dumped_as_plain_records(tmp_path: Path) -> None:
    out = dump("--json", str(data_dir(tmp_path)))
    assert out.returncode == 0, out.stderr
    by_file = {Path(json.loads(line)["file"]).parent.name: json.loads(line) for line in out.stdout.splitlines()}
    topic = by_file["orders-0"]["records"]
    assert [(r["offset"], r["CreateTime"], r["key"], r["payload"], r["headers"]) for r in topic] == [
        (0, T0, "order-0", '{"total": 0}', [["source", "web"]]),
        (1, T0 + 1, "order-1", '{"total": 1}', []),
    ]
    (commit,) = by_file["__consumer_offsets-7"]["records"]
    assert commit["key"]["data"] == {"group": "g", "topic": "orders", "partition": 0}
    assert commit["payload"]["data"]["offset"] == 42


def test_text_output_of_a_topic_partition(tmp_path: Path) -> None:
    out = dump(str(data_dir(tmp_path) / "orders-0"))
    assert out.returncode == 0, out.stderr
    assert 'key: "order-0" payload: "{\\"total\\": 0}" headers: [["source","web"]]' in out.stdout
    assert "unknown" not in out.stdout


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    data = data_dir(tmp_path, topic_records=5000)  # far more than a pipe holds
    proc = subprocess.Popen([sys.executable, "-m", "kcoord", "dump-log", str(data)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"Dumping")
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141
