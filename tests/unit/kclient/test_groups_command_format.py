"""`kcoord groups` without a broker: Kafka's option checks, duration and datetime parsing, and the
exact text of its tables."""

from __future__ import annotations

import argparse
import io
from datetime import UTC, datetime

import pytest

from kclient import groups_command
from kclient.admin_client import GroupDescription, Member, Node, StreamsTopology
from kclient.groups_output import OffsetRow, print_members, print_offsets, print_state
from kclient.offset_reset import UsageError, parse_datetime_ms, parse_duration_ms, parse_topic_arg


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    groups_command.add_parser(parser.add_subparsers())
    return parser.parse_args(["groups", "--bootstrap-server", "h:1", *argv])


@pytest.mark.parametrize(("argv", "message"), [
    ((), "exactly one action"),
    (("--list", "--delete"), "exactly one action"),
    (("--describe",), "takes one of these options: --group, --all-groups"),
    (("--describe", "--group", "g", "--all-groups"), "can't be used with"),
    (("--describe", "--group", "g", "--state", "x"), "does not take a value for --state"),
    (("--list", "--members"), "--describe only"),
    (("--delete", "--group", "g", "--topic", "t"), "topic-specific offset deletion"),
    (("--delete-offsets", "--group", "g"), "--delete-offsets takes the following options"),
    (("--reset-offsets", "--group", "g", "--dry-run", "--execute", "--to-latest"), "only accepts one of"),
    (("--reset-offsets", "--group", "g", "--to-offset", "1", "--shift-by", "2"), "can't be used with"),
    (("--list", "--to-earliest"), "--reset-offsets only"),
    (("--describe", "--group", "g", "--type"), "--list only"),
])
def test_refused_combinations(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        groups_command.check_args(parse(*argv))


def test_accepted_combinations() -> None:
    assert groups_command.check_args(parse("--list", "--state", "--type")) == "list"
    assert groups_command.check_args(parse("--describe", "--group", "g", "--members", "--verbose")) == "describe"
    assert groups_command.check_args(parse("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest")) \
        == "reset_offsets"


def test_durations_and_datetimes_as_java_reads_them() -> None:
    assert parse_duration_ms("PT30M") == 1_800_000
    assert parse_duration_ms("P1DT2H3M4.5S") == 86_400_000 + 7_200_000 + 180_000 + 4_500
    assert parse_duration_ms("-PT1S") == -1000
    for bad in ("30m", "P", "PT", "P1DT"):
        with pytest.raises(UsageError):
            parse_duration_ms(bad)
    assert parse_datetime_ms("2026-01-02T03:04:05.678Z") == int(
        datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC).timestamp() * 1000)
    assert parse_datetime_ms("2026-01-02T03:04:05.678+01:00") == parse_datetime_ms("2026-01-02T02:04:05.678Z")
    assert parse_topic_arg("t:0,2") == ("t", [0, 2]) and parse_topic_arg("t") == ("t", None)
    with pytest.raises(UsageError, match="Invalid partition 'x'"):
        parse_topic_arg("t:0,x")


def _group(state: str, members: list[Member]) -> GroupDescription:
    return GroupDescription("billing", state, "Classic", "range", Node(1, "127.0.0.1", 9092), members)


def test_offsets_table_is_kafkas() -> None:
    out, err = io.StringIO(), io.StringIO()
    rows = [OffsetRow("billing", "orders", 0, 4, 10, "consumer-1-" + "a" * 30, "/127.0.0.1", "consumer-1"),
            OffsetRow("billing", "orders", 1, None, 3, "-", "-", "-")]
    print_offsets(_group("Stable", []), rows, out, err)
    cid = "consumer-1-" + "a" * 30
    assert out.getvalue() == (
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        + "CONSUMER-ID".ljust(len(cid)) + " HOST            CLIENT-ID"
        + "\nbilling         orders          0          4               10              6               "
        + cid + " /127.0.0.1      consumer-1"
        + "\nbilling         orders          1          -               3               -               "
        + "-".ljust(len(cid)) + " -               -\n")
    assert err.getvalue() == ""


def test_empty_dead_and_rebalancing_groups_are_announced_as_kafka_does() -> None:
    out, err = io.StringIO(), io.StringIO()
    print_offsets(_group("Empty", []), [], out, err)
    assert out.getvalue() == "" and err.getvalue() == "\nConsumer group 'billing' has no active members.\n"
    out, err = io.StringIO(), io.StringIO()
    print_state(_group("Dead", []), out, err)
    assert out.getvalue() == "\nError: Consumer group 'billing' does not exist.\n"
    out, err = io.StringIO(), io.StringIO()
    print_members(_group("PreparingRebalance", [Member("m-1", "i-1", "c", "/h", [("t", 1), ("t", 0), ("u", 2)])]),
                  True, out, err)
    assert err.getvalue() == "\nWarning: Consumer group 'billing' is rebalancing.\n"
    header, row = out.getvalue().strip("\n").split("\n")
    assert header.split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                              "ASSIGNMENT"]
    assert row.split(None, 5) == ["billing", "m-1", "i-1", "/h", "c", "3               t(0,1), u(2)"]


def test_a_streams_groups_state_has_kafka_streams_groups_columns_and_epochs_when_verbose() -> None:
    group = GroupDescription("wordcount", "NotReady", "Streams", "sticky", Node(1, "127.0.0.1", 9092),
                             [Member("m-1", None, "c", "/h", [])], StreamsTopology(4, 3, 1, None))
    out, err = io.StringIO(), io.StringIO()
    print_state(group, out, err)
    header, row = out.getvalue().strip("\n").split("\n")
    assert header.split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNOR", "STATE", "#MEMBERS"]
    assert row.split() == ["wordcount", "127.0.0.1:9092", "(1)", "sticky", "NotReady", "1"]
    out = io.StringIO()
    print_state(group, out, err, verbose=True)
    header, row = out.getvalue().strip("\n").split("\n")
    assert header.split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert row.split()[-3:] == ["4", "3", "1"] and err.getvalue() == ""
