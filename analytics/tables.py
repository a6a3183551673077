"""The analysis tables, as Spark DataFrames over the decoded records.

Records of one key are ordered by ``seq`` (log partition, then log offset): a group's records
all live in one partition of the offsets topic, so that is the order the broker wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from analytics import rules
from analytics.decoder import CONSUMER_GROUP, GROUP_METADATA, SHARE_GROUP, STREAMS_GROUP
from analytics.share_state import PROGRESS_FIELDS, fold

KEY = ["group", "topic", "partition"]


@dataclass
class Options:
    now_ms: int
    bucket_ms: int
    retention_ms: int
    window: int = rules.DEFAULT_WINDOW


def _seq() -> Column:
    # Offsets stay far below 2**44 (17 trillion) in any real partition.
    return F.col("log_partition").cast("long") * F.lit(1 << 44) + F.col("log_offset")


# The columns of the records view the commit tables need; reading only these is much cheaper.
COMMIT_COLUMNS = ("log_partition int, log_offset long, group string, topic string, partition int, "
                  "committed_offset long, leader_epoch int, metadata string, commit_timestamp timestamp, "
                  "expire_timestamp timestamp, batch_timestamp timestamp, tombstone boolean, txn string")


def commit_buckets(commits: DataFrame, bucket_ms: int, window: int) -> DataFrame:
    """Offset commits summed up per group/topic/partition and time bucket, in one aggregation.

    Everything the commit tables need survives the summing: counts, first and last offset and
    time, the newest tombstone, and the ``window`` newest commits with all their fields. Being
    an aggregation rather than a sort, Spark combines rows before it shuffles them, so a
    million commits shrink to one row per partition and bucket before leaving the reader.
    Tombstones take no part in ordering the live commits (their ``live_seq`` is null), nor do
    transactional commits whose transaction aborted: they are only counted.
    """
    applied = ~F.col("tombstone") & (F.col("txn").isNull() | (F.col("txn") != "aborted"))
    live_seq = F.when(applied, F.col("seq"))
    live_at = F.when(applied, F.col("at"))
    commit = F.struct("seq", F.col("committed_offset").alias("offset"), "at", "leader_epoch", "metadata",
                      "expire_timestamp")
    return (commits
            .withColumn("seq", _seq())
            .withColumn("at", F.unix_millis(F.coalesce("commit_timestamp", "batch_timestamp")))
            .withColumn("bucket", (F.floor(F.col("at") / bucket_ms) * bucket_ms).cast("long"))
            .groupBy(*KEY, "bucket")
            .agg(F.count(live_seq).alias("commits"),
                 F.count(F.when(F.col("txn") == "committed", 1)).alias("txn_commits"),
                 F.count(F.when(F.col("txn") == "aborted", 1)).alias("aborted_txn_commits"),
                 F.min_by("committed_offset", live_seq).alias("first_offset"),
                 F.max_by("committed_offset", live_seq).alias("last_offset"),
                 F.min(live_at).alias("first_at"), F.max(live_at).alias("last_at"),
                 F.max(F.when(F.col("tombstone"), F.col("seq"))).alias("last_tomb"),
                 F.max_by(commit, live_seq, window).alias("recent")))


def recent_commits(buckets: DataFrame, window: int) -> DataFrame:
    """Per partition with a current offset: its last ``window`` live commits, oldest first.

    A commit is live when it came after the partition's newest tombstone (a deleted group or
    offset that was committed again later starts afresh).
    """
    n = window
    return (buckets.groupBy(*KEY)
            .agg(F.max("last_tomb").alias("last_tomb"), F.flatten(F.collect_list("recent")).alias("all"))
            .withColumn("live", F.array_sort(F.filter(
                "all", lambda c: F.col("last_tomb").isNull() | (c["seq"] > F.col("last_tomb")))))
            .withColumn("recent", F.slice("live", F.greatest(F.size("live") - n + 1, F.lit(1)), n))
            .filter(F.size("recent") > 0)
            .select(*KEY, "recent", F.element_at("recent", -1).alias("last")))


def end_offsets_df(spark: SparkSession, samples: list[rules.EndOffset]) -> DataFrame:
    schema = "topic string, partition int, end_offset long, sampled_at long"
    return spark.createDataFrame([(s.topic, s.partition, s.end_offset, s.sampled_at_ms) for s in samples], schema)


def latest_offsets(recent: DataFrame, ends: DataFrame | None) -> DataFrame:
    """kafka-consumer-groups.sh --describe: CURRENT-OFFSET per partition, and LAG when end offsets are known."""
    out = recent.select(*KEY, F.col("last.offset").alias("current_offset"), "last.leader_epoch", "last.metadata",
                        F.timestamp_millis("last.at").alias("last_commit"), "last.expire_timestamp")
    if ends is None:
        return out
    # The newest sample counts; one without a time stands for "now".
    current = (ends.groupBy("topic", "partition")
               .agg(F.max_by("end_offset", F.coalesce("sampled_at", F.lit(1 << 62))).alias("log_end_offset")))
    return (out.join(current, ["topic", "partition"], "left")
            # Unknown for partitions without an end offset (greatest() would skip the null).
            .withColumn("lag", F.when(F.col("log_end_offset").isNotNull(),
                                      F.greatest(F.lit(0), F.col("log_end_offset") - F.col("current_offset"))))
            .select(*KEY, "current_offset", "log_end_offset", "lag", "leader_epoch", "metadata", "last_commit",
                    "expire_timestamp"))


def with_lag_seconds(latest: DataFrame, first_unconsumed: DataFrame, now_ms: int) -> DataFrame:
    """``lag_seconds``: the as-of time minus the timestamp of the first record at or after the
    committed offset (read from the topic's own log: ``first_unconsumed`` holds topic, partition,
    offset and that record's ``timestamp``); 0 when nothing is left to consume, unknown without
    the topic's log."""
    stamps = first_unconsumed.withColumnRenamed("offset", "current_offset")
    seconds = F.greatest(F.lit(0.0), (F.lit(now_ms) - F.col("timestamp")) / F.lit(1000.0))
    return (latest.join(stamps, ["topic", "partition", "current_offset"], "left")
            .withColumn("lag_seconds", F.when(F.col("lag") == 0, F.lit(0.0))
                        .when(F.col("timestamp").isNotNull(), seconds))
            .select(*latest.columns, "lag_seconds"))


def commit_activity(buckets: DataFrame, bucket_ms: int) -> DataFrame:
    """Per group/topic/partition and time bucket: commits, offset advance, time between commits.

    Advance and time are measured from the previous commit, which may lie in an earlier
    bucket: summed over buckets they telescope to the partition's whole progress. Of the commits,
    ``txn_commits`` were made by committed transactions (TxnOffsetCommit); ``aborted_txn_commits``
    counts those of aborted transactions, which are not among ``commits`` and moved nothing.
    """
    w = Window.partitionBy(*KEY).orderBy("bucket")
    prev_offset = F.lag("last_offset").over(w)
    prev_at = F.lag("last_at").over(w)
    return (buckets.filter((F.col("commits") > 0) | (F.col("aborted_txn_commits") > 0))
            .withColumn("prev_offset", prev_offset).withColumn("prev_at", prev_at)
            .withColumn("intervals", F.col("commits") - F.when(F.col("prev_at").isNull(), 1).otherwise(0))
            .select(*KEY, F.timestamp_millis("bucket").alias("bucket_start"), F.lit(bucket_ms).alias("bucket_ms"),
                    "commits", "txn_commits", "aborted_txn_commits", "first_offset", "last_offset",
                    (F.col("last_offset") - F.coalesce("prev_offset", "first_offset")).alias("offset_advance"),
                    ((F.col("last_offset") - F.coalesce("prev_offset", "first_offset")) / F.lit(bucket_ms / 1000))
                    .alias("offsets_per_second"),
                    F.when(F.col("intervals") > 0,
                           (F.col("last_at") - F.coalesce("prev_at", "first_at")) / F.col("intervals"))
                    .alias("avg_ms_between_commits"),
                    F.timestamp_millis("last_at").alias("last_commit_in_bucket")))


_STATUS = StructType([StructField("status", StringType()), StructField("reason", StringType())])


def _evaluate(window: list[Any], current_lag: int | None, now_ms: int) -> tuple[str, str]:
    commits_ = [rules.Commit(r["offset"], r["at"], r["lag"]) for r in sorted(window, key=lambda r: r["seq"])]
    return rules.partition_status(commits_, current_lag, now_ms)


def partition_status(recent: DataFrame, latest: DataFrame, ends: DataFrame | None, opts: Options) -> DataFrame:
    """Burrow's status of every partition that still has a committed offset."""
    window = recent.select(*KEY, F.transform("recent", lambda c: F.struct(
        c["seq"].alias("seq"), c["offset"].alias("offset"), c["at"].alias("at"),
        F.lit(None).cast(LongType()).alias("lag"))).alias("w"))
    if ends is not None and ends.filter(F.col("sampled_at").isNotNull()).take(1):
        # Lag at each commit: the newest end-offset sample taken at or before it. The time test
        # belongs in the join, not after it: a commit older than every sample (end offsets read
        # from a data dir are all sampled now) keeps its place in the window, with no lag.
        timed = ends.filter(F.col("sampled_at").isNotNull()).select(
            F.col("topic").alias("e_topic"), F.col("partition").alias("e_partition"), "end_offset", "sampled_at")
        each = window.select(*KEY, F.explode("w").alias("c")).select(*KEY, "c.seq", "c.offset", "c.at")
        sampled_before = ((F.col("topic") == F.col("e_topic")) & (F.col("partition") == F.col("e_partition"))
                          & (F.col("sampled_at") <= F.col("at")))
        lagged = (each.join(timed, sampled_before, "left")
                  .groupBy(*KEY, "seq", "offset", "at")
                  .agg(F.max_by("end_offset", "sampled_at").alias("end_offset"))
                  .withColumn("lag", F.col("end_offset") - F.col("offset")))
        window = lagged.groupBy(*KEY).agg(F.collect_list(F.struct("seq", "offset", "at", "lag")).alias("w"))
    has_lag = "lag" in latest.columns
    lag_col = F.col("lag") if has_lag else F.lit(None).cast(LongType())
    judge = F.udf(lambda w, lag, now: _evaluate(w, lag, now), _STATUS)
    return (latest.join(window, KEY)
            .withColumn("s", judge("w", lag_col, F.lit(opts.now_ms)))
            .select(*KEY, "s.status", "s.reason", "current_offset",
                    *(["lag"] if has_lag else []), "last_commit",
                    F.timestamp_millis(F.array_min("w.at")).alias("window_start"),
                    F.size("w").alias("window_commits")))


def group_events(records: DataFrame) -> DataFrame:
    """Group-metadata records, one row per change: the group's creation (an empty generation 0,
    which some coordinators write), a completed rebalance, the group emptying, its deletion."""
    gm = (records.filter(F.col("kind") == GROUP_METADATA)
          .withColumn("seq", _seq())
          .withColumn("event", F.when(F.col("tombstone"), "deleted")
                      .when((F.size("members") == 0) & (F.col("generation") == 0), "created")
                      .when(F.size("members") == 0, "emptied").otherwise("rebalance")))
    w = Window.partitionBy("group").orderBy("seq")
    changed = (gm.withColumn("prev_gen", F.lag("generation").over(w))
               .withColumn("prev_event", F.lag("event").over(w))
               .filter(F.col("prev_event").isNull() | (F.col("event") != F.col("prev_event"))
                       | ~F.col("generation").eqNullSafe(F.col("prev_gen"))))
    return (changed.withColumn("seconds_since_previous",
                               (F.unix_millis("batch_timestamp") - F.lag(F.unix_millis("batch_timestamp")).over(w))
                               / 1000.0)
            .select("group", "generation", "event", "protocol_type", "protocol", "leader",
                    F.when(F.col("tombstone"), 0).otherwise(F.size("members")).alias("member_count"),
                    F.col("members.member_id").alias("member_ids"),
                    F.col("batch_timestamp").alias("at"), "seconds_since_previous", "log_partition",
                    "log_offset", "seq"))


def generation_history(events: DataFrame) -> DataFrame:
    return events.drop("seq")


def membership_timeline(records: DataFrame) -> DataFrame:
    """Every member ever seen: ids, host, the generations and times it was in, and when it left."""
    gm = (records.filter(F.col("kind") == GROUP_METADATA).withColumn("seq", _seq())
          .withColumn("next_at", F.lead("batch_timestamp").over(Window.partitionBy("group").orderBy("seq"))))
    seen = (gm.filter(~F.col("tombstone"))
            .select("group", "generation", "batch_timestamp", "seq", "next_at", F.explode("members").alias("m"))
            .groupBy("group", F.col("m.member_id").alias("member_id"))
            .agg(F.max_by(F.struct("m.group_instance_id", "m.client_id", "m.client_host", "m.session_timeout",
                                   "m.rebalance_timeout", "m.subscribed_topics", "m.assigned_partitions",
                                   # It left when the group next changed after the last record listing it.
                                   F.col("next_at").alias("left_at")),
                          "seq").alias("last"),
                 F.min("generation").alias("first_generation"), F.max("generation").alias("last_generation"),
                 F.countDistinct("generation").alias("generations"),
                 F.min("batch_timestamp").alias("first_seen"), F.max("batch_timestamp").alias("last_seen")))
    return seen.select("group", "member_id", "last.group_instance_id", "last.client_id", "last.client_host",
                       "first_generation", "last_generation", "generations", "first_seen", "last_seen",
                       "last.left_at", F.col("last.left_at").isNull().alias("current_member"),
                       "last.session_timeout", "last.rebalance_timeout", "last.subscribed_topics",
                       "last.assigned_partitions")


_INVENTORY_ROWS = ("group string, state string, status string, protocol_type string, protocol string, "
                   "generation int, leader string, members int, rebalances long, last_rebalance_ms long, "
                   "last_commit_ms long, partitions_with_offsets long, topics array<string>, total_lag long, "
                   "stale boolean, expire_ms long")


def group_inventory(spark: SparkSession, events: DataFrame, latest: DataFrame, status: DataFrame,
                    opts: Options) -> DataFrame:
    """One row per group (kafka-consumer-groups.sh --list/--state), judged with ``rules`` on the driver."""
    last_event = events.groupBy("group").agg(
        F.max_by(F.struct("event", "generation", "protocol_type", "protocol", "leader", "member_count",
                          F.unix_millis("at").alias("at_ms")), "seq").alias("e"),
        F.count(F.when(F.col("event") == "rebalance", 1)).alias("rebalances"),
        F.max(F.when(F.col("event") == "rebalance", F.unix_millis("at"))).alias("last_rebalance_ms"))
    has_lag = "lag" in latest.columns
    offsets = latest.groupBy("group").agg(
        F.max(F.unix_millis("last_commit")).alias("last_commit_ms"), F.count("*").alias("partitions_with_offsets"),
        F.sort_array(F.collect_set("topic")).alias("topics"),
        (F.sum("lag") if has_lag else F.lit(None).cast(LongType())).alias("total_lag"))
    statuses = status.groupBy("group").agg(F.collect_list("status").alias("statuses"))
    out = []
    for r in last_event.join(offsets, "group", "full").join(statuses, "group", "left").collect():
        e = r["e"]
        state = rules.group_state(e is not None, e is not None and e["event"] == "deleted",
                                  e["member_count"] if e is not None else 0)
        change = e["at_ms"] if e is not None else None
        last_commit = r["last_commit_ms"]
        stale = rules.is_stale(state, last_commit, change, opts.now_ms, opts.retention_ms)
        base = max((t for t in (last_commit, change) if t is not None), default=None)
        expire = base + opts.retention_ms if state == "Empty" and base is not None else None
        out.append((r["group"], state, rules.group_status(r["statuses"] or []),
                    e["protocol_type"] if e else None, e["protocol"] if e else None,
                    e["generation"] if e else None, e["leader"] if e else None,
                    e["member_count"] if e else 0, r["rebalances"] or 0, r["last_rebalance_ms"], last_commit,
                    r["partitions_with_offsets"] or 0, r["topics"] or [], r["total_lag"], stale, expire))
    out.sort(key=lambda row: row[0])
    return (spark.createDataFrame(out, _INVENTORY_ROWS)
            .withColumn("last_rebalance", F.timestamp_millis("last_rebalance_ms"))
            .withColumn("last_commit", F.timestamp_millis("last_commit_ms"))
            .withColumn("offsets_expire_at", F.timestamp_millis("expire_ms"))
            .select("group", "state", "status", "protocol_type", "protocol", "generation", "leader", "members",
                    "rebalances", "last_rebalance", "last_commit", "partitions_with_offsets", "topics",
                    "total_lag", "stale", "offsets_expire_at"))


# ---- KIP-848 consumer groups ------------------------------------------------------------------

_MEMBER_STATES = {0: "Stable", 1: "UnrevokedPartitions", 2: "UnreleasedPartitions"}


# Kafka's StreamsGroupMember.MemberState.
_STREAMS_MEMBER_STATES = {0: "Stable", 1: "UnrevokedTasks", 2: "UnreleasedTasks"}


def _state_name(column: str, states: dict[int, str] = _MEMBER_STATES) -> Column:
    expr = F.lit("Unknown")
    for value, name in sorted(states.items(), reverse=True):
        expr = F.when(F.col(column) == value, name).otherwise(expr)
    return expr


def _partition_count(column: str) -> Column:
    return F.coalesce(F.aggregate(F.col(column), F.lit(0), lambda acc, tp: acc + F.size(tp["partitions"])), F.lit(0))


def consumer_group_history(records: DataFrame) -> DataFrame:
    """A consumer group's epochs over time: every group epoch bump (membership, subscription or
    subscribed topics changed), every new target assignment, and the group's deletion."""
    epochs = (records.filter(F.col("record_type").isin("ConsumerGroupMetadata", "ConsumerGroupTargetAssignmentMetadata"))
              .withColumn("seq", _seq())
              .withColumn("event", F.when(F.col("tombstone") & (F.col("record_type") == "ConsumerGroupMetadata"),
                                          "deleted")
                          .when(F.col("tombstone"), "target assignment deleted")
                          .when(F.col("record_type") == "ConsumerGroupMetadata", "group epoch")
                          .otherwise("target assignment")))
    w = Window.partitionBy("group").orderBy("seq")
    return (epochs.withColumn("seconds_since_previous",
                              (F.unix_millis("batch_timestamp") - F.lag(F.unix_millis("batch_timestamp")).over(w))
                              / 1000.0)
            .select("group", "event", "epoch", F.col("batch_timestamp").alias("at"), "seconds_since_previous",
                    "log_partition", "log_offset"))


def consumer_assignments(records: DataFrame) -> DataFrame:
    """Every step of every member's reconciliation: its epoch, state, the partitions it owns and
    those it still has to give up, from each current-assignment record; a member leaving releases
    everything (state "Left")."""
    current = records.filter(F.col("record_type") == "ConsumerGroupCurrentMemberAssignment")
    return current.select(
        "group", "member_id", F.col("batch_timestamp").alias("at"), F.col("epoch").alias("member_epoch"),
        "previous_member_epoch",
        F.when(F.col("tombstone"), "Left").otherwise(_state_name("member_state")).alias("state"),
        F.coalesce("assignment", F.array()).alias("assigned"), _partition_count("assignment").alias("assigned_count"),
        F.coalesce("pending_revocation", F.array()).alias("pending_revocation"),
        _partition_count("pending_revocation").alias("pending_revocation_count"),
        "log_partition", "log_offset")


def consumer_group_members(records: DataFrame) -> DataFrame:
    """Every member a consumer group has had: who it is (the last metadata it wrote), which protocol
    it speaks (a classic member joined with JoinGroup during an online migration), when it came and
    left, the epochs it went through and what it owned last."""
    cg = records.filter(F.col("kind") == CONSUMER_GROUP).withColumn("seq", _seq())
    meta = (cg.filter(F.col("record_type") == "ConsumerGroupMemberMetadata")
            .groupBy("group", "member_id")
            .agg(F.max_by(F.struct(F.col("tombstone").alias("left"), F.col("batch_timestamp").alias("at")),
                          "seq").alias("last"),
                 # Who it is: its last metadata before any tombstone.
                 F.max_by("consumer_member", F.when(~F.col("tombstone"), F.col("seq"))).alias("identity"),
                 F.min("batch_timestamp").alias("first_seen"),
                 F.max(F.when(~F.col("tombstone"), F.col("batch_timestamp"))).alias("last_seen")))
    current = (cg.filter(F.col("record_type") == "ConsumerGroupCurrentMemberAssignment")
               .groupBy("group", "member_id")
               .agg(F.max_by(F.struct("epoch", "member_state", "assignment"),
                             F.when(~F.col("tombstone"), F.col("seq"))).alias("c"),
                    F.countDistinct(F.when(~F.col("tombstone"), F.col("epoch"))).alias("epochs")))
    m = F.col("identity")
    return (meta.join(current, ["group", "member_id"], "left")
            .select("group", "member_id", m["instance_id"].alias("instance_id"), m["client_id"].alias("client_id"),
                    m["client_host"].alias("client_host"),
                    F.when(m["classic_session_timeout_ms"].isNotNull(), "classic").otherwise("consumer")
                    .alias("protocol"),
                    m["subscribed_topic_names"].alias("subscribed_topic_names"),
                    m["subscribed_topic_regex"].alias("subscribed_topic_regex"),
                    m["server_assignor"].alias("server_assignor"),
                    m["rebalance_timeout_ms"].alias("rebalance_timeout_ms"),
                    "first_seen", "last_seen",
                    F.when(F.col("last.left"), F.col("last.at")).alias("left_at"),
                    (~F.col("last.left")).alias("current_member"),
                    F.col("c.epoch").alias("last_member_epoch"), _state_name("c.member_state").alias("last_state"),
                    F.coalesce("epochs", F.lit(0)).alias("epochs"),
                    F.coalesce(F.col("c.assignment"), F.array()).alias("last_assigned")))


def streams_group_history(records: DataFrame) -> DataFrame:
    """A streams group's epochs over time: every group epoch bump, every new target assignment,
    every topology the group validated (with its subtopologies), and the group's deletion."""
    kinds = ("StreamsGroupMetadata", "StreamsGroupTargetAssignmentMetadata", "StreamsGroupTopology")
    epochs = (records.filter(F.col("record_type").isin(*kinds))
              .withColumn("seq", _seq())
              .withColumn("event", F.when(F.col("tombstone") & (F.col("record_type") == "StreamsGroupMetadata"),
                                          "deleted")
                          .when(F.col("tombstone"), F.lit(None))
                          .when(F.col("record_type") == "StreamsGroupMetadata", "group epoch")
                          .when(F.col("record_type") == "StreamsGroupTopology", "topology")
                          .otherwise("target assignment"))
              .filter(F.col("event").isNotNull()))
    w = Window.partitionBy("group").orderBy("seq")
    return (epochs.withColumn("seconds_since_previous",
                              (F.unix_millis("batch_timestamp") - F.lag(F.unix_millis("batch_timestamp")).over(w))
                              / 1000.0)
            .select("group", "event", "epoch", F.col("subtopologies"), F.col("batch_timestamp").alias("at"),
                    "seconds_since_previous", "log_partition", "log_offset"))


def streams_group_members(records: DataFrame) -> DataFrame:
    """Every member a streams group has had: its process and client (the last metadata it wrote),
    when it came and left, the member epochs it went through and the tasks it held last."""
    sg = records.filter(F.col("kind") == STREAMS_GROUP).withColumn("seq", _seq())
    meta = (sg.filter(F.col("record_type") == "StreamsGroupMemberMetadata")
            .groupBy("group", "member_id")
            .agg(F.max_by(F.struct(F.col("tombstone").alias("left"), F.col("batch_timestamp").alias("at")),
                          "seq").alias("last"),
                 F.max_by("streams_member", F.when(~F.col("tombstone"), F.col("seq"))).alias("identity"),
                 F.min("batch_timestamp").alias("first_seen"),
                 F.max(F.when(~F.col("tombstone"), F.col("batch_timestamp"))).alias("last_seen")))
    current = (sg.filter(F.col("record_type") == "StreamsGroupCurrentMemberAssignment")
               .groupBy("group", "member_id")
               .agg(F.max_by(F.struct("epoch", "member_state", "active_tasks", "standby_tasks", "warmup_tasks"),
                             F.when(~F.col("tombstone"), F.col("seq"))).alias("c"),
                    F.countDistinct(F.when(~F.col("tombstone"), F.col("epoch"))).alias("epochs")))
    m = F.col("identity")
    return (meta.join(current, ["group", "member_id"], "left")
            .select("group", "member_id", m["process_id"].alias("process_id"), m["instance_id"].alias("instance_id"),
                    m["client_id"].alias("client_id"), m["client_host"].alias("client_host"),
                    m["topology_epoch"].alias("topology_epoch"), "first_seen", "last_seen",
                    F.when(F.col("last.left"), F.col("last.at")).alias("left_at"),
                    (~F.col("last.left")).alias("current_member"),
                    F.col("c.epoch").alias("last_member_epoch"),
                    _state_name("c.member_state", _STREAMS_MEMBER_STATES).alias("last_state"),
                    F.coalesce("epochs", F.lit(0)).alias("epochs"),
                    F.coalesce(F.col("c.active_tasks"), F.array()).alias("last_active_tasks"),
                    F.coalesce(F.col("c.standby_tasks"), F.array()).alias("last_standby_tasks"),
                    _partition_count("c.active_tasks").alias("active_task_count"),
                    _partition_count("c.standby_tasks").alias("standby_task_count")))



# ---- KIP-932 share groups -----------------------------------------------------------------------


def _since_previous(w: Any) -> Column:
    return (F.unix_millis("batch_timestamp") - F.lag(F.unix_millis("batch_timestamp")).over(w)) / 1000.0


def share_group_history(records: DataFrame) -> DataFrame:
    """A share group over time: every group epoch bump, new target assignment, change of the
    topics whose share state it initialized (``share_topics``), member joining or leaving, and the
    group's deletion."""
    sg = records.filter(F.col("kind") == SHARE_GROUP).withColumn("seq", _seq())
    per_member = Window.partitionBy("group", "member_id").orderBy("seq")
    members = (sg.filter(F.col("record_type") == "ShareGroupMemberMetadata")
               .withColumn("was_member", F.coalesce(~F.lag("tombstone").over(per_member), F.lit(False)))
               .withColumn("event", F.when(F.col("tombstone") & F.col("was_member"), "member left")
                           .when(~F.col("tombstone") & ~F.col("was_member"), "member joined"))
               .filter(F.col("event").isNotNull()))
    kinds = ("ShareGroupMetadata", "ShareGroupTargetAssignmentMetadata", "ShareGroupStatePartitionMetadata")
    group_events_ = (sg.filter(F.col("record_type").isin(*kinds))
                     .withColumn("event", F.when(F.col("tombstone") & (F.col("record_type") == "ShareGroupMetadata"),
                                                 "deleted")
                                 .when(F.col("tombstone"), F.lit(None))
                                 .when(F.col("record_type") == "ShareGroupMetadata", "group epoch")
                                 .when(F.col("record_type") == "ShareGroupStatePartitionMetadata", "share state topics")
                                 .otherwise("target assignment"))
                     .filter(F.col("event").isNotNull()))
    cols = ["group", "event", "epoch", "member_id", "share_topics", "batch_timestamp", "seq", "log_partition",
            "log_offset"]
    both = group_events_.select(*cols).unionByName(members.select(*cols))
    w = Window.partitionBy("group").orderBy("seq")
    return (both.withColumn("seconds_since_previous", _since_previous(w))
            .select("group", "event", "epoch", "member_id", "share_topics", F.col("batch_timestamp").alias("at"),
                    "seconds_since_previous", "log_partition", "log_offset"))


def share_topic_names(records: DataFrame) -> DataFrame:
    """topic_id -> topic (the newest name a share group's state-partition record gave it)."""
    named = (records.filter(F.col("record_type") == "ShareGroupStatePartitionMetadata")
             .filter(~F.col("tombstone"))
             .select(_seq().alias("seq"), F.explode("share_topics").alias("t")))
    return named.groupBy(F.col("t.topic_id").alias("topic_id")).agg(F.max_by("t.topic_name", "seq").alias("topic"))


def _named(assignment: DataFrame, names: DataFrame, key: list[str], column: str) -> DataFrame:
    """``column`` (topic_id/partitions pairs) with each topic's name beside its id, per ``key``."""
    each = (assignment.select(*key, F.explode(column).alias("a"))
            .select(*key, F.col("a.topic_id").alias("topic_id"), F.col("a.partitions").alias("partitions")))
    return (each.join(names, "topic_id", "left")
            .groupBy(*key)
            .agg(F.sort_array(F.collect_list(F.struct("topic", "topic_id", F.sort_array("partitions")
                                                      .alias("partitions")))).alias(column)))


def share_group_members(records: DataFrame) -> DataFrame:
    """Every member a share group has had: its client (the last metadata it wrote), subscription,
    when it came and left, the member epochs it went through and the partitions it was assigned
    last (with topic names where the group's records give them)."""
    sg = records.filter(F.col("kind") == SHARE_GROUP).withColumn("seq", _seq())
    meta = (sg.filter(F.col("record_type") == "ShareGroupMemberMetadata")
            .groupBy("group", "member_id")
            .agg(F.max_by(F.struct(F.col("tombstone").alias("left"), F.col("batch_timestamp").alias("at")),
                          "seq").alias("last"),
                 F.max_by("share_member", F.when(~F.col("tombstone"), F.col("seq"))).alias("identity"),
                 F.min("batch_timestamp").alias("first_seen"),
                 F.max(F.when(~F.col("tombstone"), F.col("batch_timestamp"))).alias("last_seen")))
    current = (sg.filter(F.col("record_type") == "ShareGroupCurrentMemberAssignment")
               .groupBy("group", "member_id")
               .agg(F.max_by(F.struct("epoch", "assignment"), F.when(~F.col("tombstone"), F.col("seq"))).alias("c"),
                    F.countDistinct(F.when(~F.col("tombstone"), F.col("epoch"))).alias("epochs")))
    key = ["group", "member_id"]
    assigned = _named(current.select(*key, F.col("c.assignment").alias("last_assigned")),
                      share_topic_names(sg), key, "last_assigned")
    m = F.col("identity")
    return (meta.join(current, key, "left").join(assigned, key, "left")
            .select("group", "member_id", m["client_id"].alias("client_id"), m["client_host"].alias("client_host"),
                    m["rack_id"].alias("rack_id"), m["subscribed_topic_names"].alias("subscribed_topic_names"),
                    "first_seen", "last_seen",
                    F.when(F.col("last.left"), F.col("last.at")).alias("left_at"),
                    (~F.col("last.left")).alias("current_member"),
                    F.col("c.epoch").alias("last_member_epoch"),
                    F.coalesce("epochs", F.lit(0)).alias("epochs"),
                    F.coalesce("last_assigned", F.array()).alias("last_assigned"),
                    _partition_count("c.assignment").alias("assigned_partition_count")))


# The columns ``analytics.share_state.fold`` returns, as Spark types.
_PROGRESS_TYPES = {"bucket_ms_start": LongType(), "records": IntegerType(), "snapshots": IntegerType(),
                   "updates": IntegerType(), "deleted": BooleanType(), "state_epoch": IntegerType(),
                   "leader_epoch": IntegerType(), "last_write_ms": LongType()}
_PROGRESS = ArrayType(StructType([StructField(name, _PROGRESS_TYPES.get(name, LongType()))
                                  for name in PROGRESS_FIELDS]))


def share_progress(state: DataFrame, share_groups: DataFrame | None, bucket_ms: int) -> DataFrame:
    """Per share partition (group, topic, partition) and time bucket with share-state records:
    the state after the bucket's last record, the snapshots and updates folded as the share
    coordinator folds them (``analytics.share_state.fold``: progress of the start offset, records
    acknowledged, available, archived and in flight, redeliveries and archived records so far)."""
    key = ["group", "topic_id", "partition"]
    rec = F.struct(_seq().alias("seq"), F.unix_millis("batch_timestamp").alias("at_ms"), "record_type", "tombstone",
                   "state_epoch", "leader_epoch", "start_offset", "state_batches")
    folder = F.udf(lambda rs: fold(sorted((r.asDict(recursive=True) for r in rs), key=lambda r: r["seq"]),
                                   bucket_ms), _PROGRESS)
    rows = (state.filter(F.col("kind") == "share_state")
            .groupBy(*key).agg(F.collect_list(rec).alias("rs"))
            .select(*key, F.explode(folder("rs")).alias("p")))
    if share_groups is not None:
        rows = rows.join(share_topic_names(share_groups), "topic_id", "left")
    else:
        rows = rows.withColumn("topic", F.lit(None).cast(StringType()))
    p = F.col("p")
    return rows.select("group", "topic", "topic_id", "partition",
                       F.timestamp_millis(p["bucket_ms_start"]).alias("bucket_start"), F.lit(bucket_ms).alias("bucket_ms"),
                       *(p[name].alias(name) for name in PROGRESS_FIELDS[1:-1]),
                       F.timestamp_millis(p["last_write_ms"]).alias("last_write"))
