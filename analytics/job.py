"""``kcoord analyze``: read a ``__consumer_offsets`` log with Spark, write the tables and the report."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics import rules
from analytics.report import PartitionCoverage, ReportData, render_html, share_summary, summary_text
from analytics.segments import NoSegments, list_segments

TABLES = ["latest_offsets", "commit_activity", "partition_status", "generation_history",
          "membership_timeline", "group_inventory", "consumer_group_history", "consumer_group_members",
          "consumer_assignments", "streams_group_history", "streams_group_members", "share_group_history",
          "share_group_members", "share_progress", "rebalances", "doctor"]


@dataclass
class AnalyzeOptions:
    data_dir: str
    out: str
    end_offsets: str | None = None
    master: str | None = None
    as_of_ms: int | None = None
    bucket_ms: int | None = None
    retention_ms: int = 7 * 86_400_000
    window: int = rules.DEFAULT_WINDOW


@dataclass
class AnalyzeResult:
    timings: dict[str, float] = field(default_factory=dict)
    detail: dict[str, float] = field(default_factory=dict)  # seconds per table
    tables: dict[str, int] = field(default_factory=dict)
    summary: str = ""
    problems: list[tuple[str, str]] = field(default_factory=list)


class AnalyzeError(Exception):
    """Input the analysis cannot start from; the message is for the user."""


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


SMALL_INPUT_BYTES = 4 << 20  # segment bytes below which a run is mostly Spark's own overhead


def session_conf(master: str | None, input_bytes: int | None = None) -> dict[str, str]:
    """The settings a session on ``master`` starts with. A local run stays on this machine: the
    driver binds and advertises loopback (not whatever interface the host name resolves to) and
    serves no UI. A small input on a local master also gets one shuffle partition and a JVM that
    does not spend a short run compiling for the long one."""
    conf = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            # INT96 timestamps are deprecated; every current Parquet reader takes microseconds.
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
    if master and _local_cores(master):
        conf.update({
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            # Compressing what never leaves this machine only costs CPU.
            "spark.shuffle.compress": "false",
            "spark.sql.inMemoryColumnarStorage.compressed": "false",
        })
        if input_bytes is not None and input_bytes < SMALL_INPUT_BYTES:
            conf.update({
                "spark.sql.shuffle.partitions": "1",
                "spark.default.parallelism": "1",
                # C1 only: a run of seconds is over before C2's compilations would pay off.
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            })
    return conf


def build_session(master: str | None, app_name: str = "kcoord-analyze", extra: dict[str, str] | None = None,
                  input_bytes: int | None = None) -> Any:
    """A session on ``master`` (``local[*]`` unless spark-submit chose one) with the data source
    registered; ``input_bytes`` (the segments' total size) tunes a local session for small inputs."""
    # Workers must run this interpreter (a virtualenv's, with our packages); Spark reads this
    # only when the session starts.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not master and not under_spark_submit():
        master = "local[*]"
    conf = session_conf(master, input_bytes)
    if master:
        builder = builder.master(master)
    conf.update(extra or {})
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    running_on = str(spark.sparkContext.master or "")
    cores = _local_cores(running_on)
    if cores is None:
        ship_code(spark)
    elif not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # The tables are small next to the 200 shuffle partitions meant for clusters: one per
        # core keeps local runs (spark-submit's included) from writing hundreds of tiny files.
        spark.conf.set("spark.sql.shuffle.partitions", str(cores))
    from analytics.source import register

    register(spark)
    return spark


def _local_cores(master: str) -> int | None:
    """Cores of a ``local``/``local[N]``/``local[*]`` master; None for anything that runs executors elsewhere."""
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\*|\d+)(?:,\d+)?\]", master)
    if m is None:
        return None
    return (os.cpu_count() or 2) if m.group(1) == "*" else int(m.group(1))


def ship_code(spark: Any) -> None:
    """Sends our pure-Python packages to the executors, for clusters where kcoord is not installed."""
    root = Path(__file__).resolve().parent.parent
    fd, path = tempfile.mkstemp(suffix=".zip", prefix="kcoord-analytics-")
    os.close(fd)
    with zipfile.ZipFile(path, "w") as zf:
        for pkg in ("analytics", "doctor", "protocol", "storage"):
            for f in sorted((root / pkg).rglob("*.py")):
                zf.write(f, f.relative_to(root).as_posix())
    spark.sparkContext.addPyFile(path)


def _write_text(path: str, text: str) -> None:
    if "://" in path and not path.startswith("file://"):
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(path)
        with filesystem.open_output_stream(inner) as fh:
            fh.write(text.encode())
        return
    local = path.removeprefix("file://")
    os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
    with open(local, "w", encoding="utf-8") as fh:
        fh.write(text)


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _is_local_dir(data_dir: str) -> bool:
    local = data_dir.removeprefix("file://")
    return "://" not in local and os.path.isdir(local)


def end_offsets_from_data_dir(data_dir: str) -> list[rules.EndOffset] | None:
    """A broker's data dir holds its topics' logs too: their end offsets give lag without a file."""
    local = data_dir.removeprefix("file://")
    if "://" in local or not os.path.isdir(local):
        return None
    from storage.end_offsets import topic_end_offsets

    now = int(time.time() * 1000)
    found = [rules.EndOffset(topic, partition, end, now)
             for (topic, partition), end in topic_end_offsets(local).items()]
    return found or None


def first_unconsumed_from_data_dir(data_dir: str, wanted: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
    """For each (topic, partition, committed offset, end offset) whose partition's log is in the
    data dir: (topic, partition, offset, timestamp of the first record at or after the offset)."""
    from storage.layout import partition_dir_name
    from storage.record_times import first_timestamp_at

    local = data_dir.removeprefix("file://")
    found = []
    for topic, partition, offset, end in wanted:
        ts = first_timestamp_at(os.path.join(local, partition_dir_name(topic, partition)), offset, end)
        if ts is not None:
            found.append((topic, partition, offset, ts))
    return found


def load_end_offsets(path: str | None) -> list[rules.EndOffset] | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return rules.parse_end_offsets(fh.read())
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise AnalyzeError(f"cannot read end offsets from {path}: {exc}") from None


def analyze(spark: Any, opts: AnalyzeOptions, ends: list[rules.EndOffset] | None = None,
            log: Any = None) -> AnalyzeResult:
    """Every table and the report for ``opts.data_dir``, on an existing session."""
    from pyspark.sql import functions as F

    from analytics import journal as J
    from analytics import tables as T
    from analytics.source import NAME

    result = AnalyzeResult()
    say = log or (lambda msg: None)
    t0 = time.perf_counter()
    segments = (spark.read.format(NAME).option("view", "segments").load(opts.data_dir)
                .withColumn("first_ms", F.unix_millis("first_timestamp"))
                .withColumn("last_ms", F.unix_millis("last_timestamp")).collect())
    # Two narrow reads beat one wide one: each decodes only its own kind of record, and the
    # commits carry no empty group-metadata columns into Spark. The commits are read once,
    # straight into their per-bucket summary.
    commits = (spark.read.format(NAME).option("kinds", "offset_commit").schema(T.COMMIT_COLUMNS)
               .load(opts.data_dir))
    now_ms = opts.as_of_ms if opts.as_of_ms is not None else int(time.time() * 1000)
    coverage = _coverage(segments)
    span = (max(c.last_ms for c in coverage) - min(c.first_ms for c in coverage)) if coverage else 0
    bucket_ms = opts.bucket_ms or rules.pick_bucket_ms(span)
    buckets = T.commit_buckets(commits, bucket_ms, opts.window).cache()
    n_buckets = buckets.count()
    result.detail["commits"] = time.perf_counter() - t0
    groups = spark.read.format(NAME).option("kinds", "group_metadata").load(opts.data_dir).cache()
    n_groups = groups.count()
    consumer = spark.read.format(NAME).option("kinds", "consumer_group").load(opts.data_dir).cache()
    n_consumer = consumer.count()
    streams = spark.read.format(NAME).option("kinds", "streams_group").load(opts.data_dir).cache()
    n_streams = streams.count()
    # Share groups: their records in __consumer_offsets, and the share coordinator's own log.
    shares = spark.read.format(NAME).option("kinds", "share_group").load(opts.data_dir).cache()
    n_shares = shares.count()
    share_state = spark.read.format(NAME).option("kinds", "share_state").load(opts.data_dir)
    result.timings["decode"] = time.perf_counter() - t0
    say(f"decoded {sum(s['records'] for s in segments):,} records from {len(segments)} segment file(s): "
        f"{n_groups:,} group-metadata records, {n_consumer:,} consumer-group records, {n_streams:,} streams-group "
        f"records, {n_shares:,} share-group records, offset commits summed into {n_buckets:,} partition-buckets")

    t1 = time.perf_counter()
    for s in segments:
        result.problems.extend((s["path"], p) for p in s["problems"] or [])
    # The share coordinator's log is read for share_progress: what is wrong in it is reported too.
    for s in (spark.read.format(NAME).option("view", "segments").option("kinds", "share_state")
              .load(opts.data_dir).select("path", "problems").collect()):
        result.problems.extend((s["path"], p) for p in s["problems"] or [])
    t_opts = T.Options(now_ms=now_ms, bucket_ms=bucket_ms, retention_ms=opts.retention_ms, window=opts.window)
    ends_df = T.end_offsets_df(spark, ends) if ends else None

    recent = T.recent_commits(buckets, opts.window).cache()
    latest = T.latest_offsets(recent, ends_df)
    if ends_df is not None:
        # Lag in seconds where the data dir holds the topic's log (the offsets to look up are one
        # per group and partition behind its end: few, looked up on the driver).
        behind = [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"])
                  for r in latest.filter(F.col("lag") > 0)
                  .select("topic", "partition", "current_offset", "log_end_offset").distinct().collect()]
        stamps = first_unconsumed_from_data_dir(opts.data_dir, behind) if _is_local_dir(opts.data_dir) else []
        schema = "topic string, partition int, offset long, timestamp long"
        latest = T.with_lag_seconds(latest, spark.createDataFrame(stamps, schema), now_ms)
    latest = latest.cache()
    status = T.partition_status(recent, latest, ends_df, t_opts).cache()
    events = T.group_events(groups).cache()
    frames = {
        "latest_offsets": latest,
        "commit_activity": T.commit_activity(buckets, bucket_ms),
        "partition_status": status,
        "generation_history": T.generation_history(events),
        "membership_timeline": T.membership_timeline(groups),
        "group_inventory": T.group_inventory(spark, events, latest, status, t_opts),
        "consumer_group_history": T.consumer_group_history(consumer),
        "consumer_group_members": T.consumer_group_members(consumer),
        "consumer_assignments": T.consumer_assignments(consumer),
        "streams_group_history": T.streams_group_history(streams),
        "streams_group_members": T.streams_group_members(streams),
        "share_group_history": T.share_group_history(shares),
        "share_group_members": T.share_group_members(shares),
        "share_progress": T.share_progress(share_state, shares, bucket_ms),
    }
    # The rebalance journal beside the offsets log, read on the driver (it is small).
    journal_events = J.read_events(opts.data_dir)
    rebalance_rows, doctor_rows = J.rebalance_rows(journal_events), J.doctor_rows(journal_events)
    frames["rebalances"] = J.to_frame(spark, rebalance_rows, J.REBALANCE_COLUMNS)
    frames["doctor"] = J.to_frame(spark, doctor_rows, J.DOCTOR_COLUMNS)
    small = {"partition_status", "generation_history", "membership_timeline", "group_inventory",
             "consumer_group_history", "consumer_group_members", "streams_group_history", "streams_group_members",
             "share_group_history", "share_group_members", "share_progress", "rebalances", "doctor"}
    for name, df in frames.items():
        t = time.perf_counter()
        target = _join(opts.out, name)
        (df.coalesce(1) if name in small else df).write.mode("overwrite").parquet(target)
        result.tables[name] = _count_rows(spark, target)
        result.detail[name] = time.perf_counter() - t
    result.timings["queries"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    # The report's inputs are small, written tables: reading them back with pyarrow on the
    # driver saves a Spark job each.
    rate = _read_table(spark, _join(opts.out, "commit_activity"), ["group", "bucket_start", "commits"])
    rate = rate.group_by(["group", "bucket_start"]).aggregate([("commits", "sum")])
    history = _read_table(spark, _join(opts.out, "generation_history"),
                          ["group", "generation", "event", "at", "member_count"])
    inv = sorted(_read_table(spark, _join(opts.out, "group_inventory"), None).to_pylist(), key=lambda r: r["group"])
    statuses = _read_table(spark, _join(opts.out, "partition_status"), ["status"]).column("status").to_pylist()
    counts = dict(Counter(statuses))
    event_rows = [{**e, "at_ms": e.pop("at")} for e in _with_ms(history, "at").to_pylist()]
    share_rows = share_summary(
        _read_table(spark, _join(opts.out, "share_progress"), None).to_pylist(),
        _read_table(spark, _join(opts.out, "share_group_members"), ["group", "current_member"]).to_pylist())
    rate_rows = _with_ms(rate, "bucket_start").to_pylist()
    data = ReportData(source=opts.data_dir, now_ms=now_ms, bucket_ms=bucket_ms, retention_ms=opts.retention_ms,
                      coverage=coverage, problems=result.problems, inventory=inv,
                      commit_rate=[(r["bucket_start"], r["group"], r["commits_sum"]) for r in rate_rows],
                      events=event_rows, status_counts=counts, tables=result.tables,
                      end_offsets_given=bool(ends), rebalances=rebalance_rows, findings=doctor_rows,
                      share_groups=share_rows)
    result.summary = summary_text(data)
    _write_text(_join(opts.out, "summary.txt"), result.summary + "\n")
    _write_text(_join(opts.out, "report.html"), render_html(data, result.summary))
    result.timings["report"] = time.perf_counter() - t2
    for df in (buckets, recent, groups, consumer, streams, shares, latest, status, events):
        df.unpersist()
    return result


def _read_table(spark: Any, target: str, columns: list[str] | None) -> Any:
    """A written table as a pyarrow Table, on the driver."""
    import pyarrow.dataset as ds

    if "://" in target and not target.startswith("file://"):
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(target)
        return ds.dataset(inner, format="parquet", filesystem=filesystem).to_table(columns=columns)
    return ds.dataset(target.removeprefix("file://"), format="parquet").to_table(columns=columns)


def _with_ms(table: Any, column: str) -> Any:
    """``column`` (a timestamp) as integer milliseconds since the epoch."""
    import pyarrow as pa

    i = table.schema.get_field_index(column)
    ms = table.column(i).cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    return table.set_column(i, column, ms)


def _count_rows(spark: Any, target: str) -> int:
    """Rows of a written Parquet table, from the file footers alone."""
    try:
        import pyarrow.dataset as ds

        if "://" in target and not target.startswith("file://"):
            from pyarrow import fs

            filesystem, inner = fs.FileSystem.from_uri(target)
            return int(ds.dataset(inner, format="parquet", filesystem=filesystem).count_rows())
        return int(ds.dataset(target.removeprefix("file://"), format="parquet").count_rows())
    except (OSError, ValueError):
        return int(spark.read.parquet(target).count())  # a file system pyarrow cannot open


def _coverage(segments: list[Any]) -> list[PartitionCoverage]:
    """Offsets and times each log partition still holds, from the segments' batch headers."""
    by_part: dict[int, PartitionCoverage] = {}
    for s in segments:
        if s["first_offset"] is None or s["first_ms"] is None:
            continue
        first_ms, last_ms = s["first_ms"], s["last_ms"]
        c = by_part.get(s["log_partition"])
        if c is None:
            by_part[s["log_partition"]] = PartitionCoverage(s["log_partition"], s["first_offset"], s["last_offset"],
                                                            s["records"], first_ms, last_ms)
            continue
        c.first_offset = min(c.first_offset, s["first_offset"])
        c.last_offset = max(c.last_offset, s["last_offset"])
        c.records += s["records"]
        c.first_ms = min(c.first_ms, first_ms)
        c.last_ms = max(c.last_ms, last_ms)
    return [by_part[k] for k in sorted(by_part)]


def run(opts: AnalyzeOptions, out: Any = None) -> int:
    """The command: checks the input, starts Spark, analyses, prints the summary. Returns an exit code."""
    stream = out or sys.stdout
    try:
        found = list_segments(opts.data_dir)
        ends = load_end_offsets(opts.end_offsets)
        if ends is None:
            ends = end_offsets_from_data_dir(opts.data_dir)
    except (NoSegments, AnalyzeError) as exc:
        print(f"kcoord analyze: {exc}", file=sys.stderr)
        return 2
    print(f"kcoord analyze: {len(found)} segment file(s) under {opts.data_dir}", file=stream)
    t0 = time.perf_counter()
    try:
        spark = build_session(opts.master, input_bytes=sum(f.size for f in found))
    except ImportError:
        print("kcoord analyze: needs the analysis extra: pip install 'kcoord[analysis]'", file=sys.stderr)
        return 2
    startup = time.perf_counter() - t0
    result = analyze(spark, opts, ends, log=lambda m: print(f"kcoord analyze: {m}", file=stream))
    result.timings = {"startup": startup, **result.timings}
    print(result.summary, file=stream)
    print(f"kcoord analyze: wrote {', '.join(f'{k} ({v:,} rows)' for k, v in result.tables.items())}, "
          f"report.html and summary.txt to {opts.out}", file=stream)
    print("kcoord analyze: time " + ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items()), file=stream)
    return 0
