"""What `kcoord groups` prints, column for column as `kafka-consumer-groups.sh` prints it: the same
headers, widths, "-" for a missing value, and the same notices for empty, rebalancing and
missing groups."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from kclient.admin_client import GroupDescription, GroupListing, Member, TopicPartition

MISSING = "-"
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


@dataclass
class OffsetRow:
    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    log_end: int | None
    consumer_id: str
    host: str
    client_id: str
    # The partition's log start: records below it were deleted (retention, DeleteRecords).
    log_start: int | None = None

    @property
    def lag(self) -> int | None:
        """What the group has left to consume: a committed offset below the log start counts from
        the log start, as the broker's lag metric does (Kafka's tool subtracts the committed offset
        alone, counting records no consumer can read any more)."""
        if self.offset is None or self.offset == -1 or self.log_end is None:
            return None
        return self.log_end - max(self.offset, self.log_start or 0)


def _show(value: object) -> str:
    return MISSING if value is None else str(value)


def print_error(message: str, out: TextIO | None = None) -> None:
    print(f"\nError: {message}", file=out or sys.stdout)


def should_print(group: str, state: str, rows: int | None, out: TextIO, err: TextIO,
                 kind: str = "Consumer group") -> bool:
    """Kafka's notices before a description: a missing group is an error, an empty one and a
    rebalancing one a note on stderr; rows are printed only for a live group that has some."""
    if rows is None:
        print_error(f"The consumer group '{group}' does not exist.", out)
        return False
    if state == "Dead":
        print_error(f"Consumer group '{group}' does not exist.", out)
    elif state == "Empty":
        print(f"\n{kind} '{group}' has no active members.", file=err)
    elif state in REBALANCING:
        print(f"\nWarning: {kind} '{group}' is rebalancing.", file=err)
    return state != "Dead" and rows > 0


def print_listing(groups: list[GroupListing], include_type: bool, include_state: bool, out: TextIO) -> None:
    width = max([15, *(len(g.group_id) for g in groups)]) + 10
    columns = [(f"%-{width}s", "GROUP", lambda g: g.group_id)]
    if include_type:
        columns.append(("%-20s", "TYPE", lambda g: g.group_type))
    if include_state:
        columns.append(("%-20s", "STATE", lambda g: g.state))
    fmt = " ".join(c[0] for c in columns)
    print(fmt % tuple(c[1] for c in columns), file=out)
    for g in groups:
        print(fmt % tuple(c[2](g) for c in columns), file=out)


def print_offsets(group: GroupDescription, rows: list[OffsetRow], out: TextIO, err: TextIO) -> None:
    if not should_print(group.group_id, group.state, len(rows), out, err):
        return
    wg = max([15, *(len(r.group) for r in rows)])
    wt = max([15, *(len(_show(r.topic)) for r in rows)])
    wc = max([15, *(len(r.consumer_id) for r in rows)])
    wh = max([15, *(len(r.host) for r in rows)])
    fmt = f"\n%-{wg}s %-{wt}s %-10s %-15s %-15s %-15s %-{wc}s %-{wh}s %s"
    text = fmt % ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID")
    for r in rows:
        text += fmt % (r.group, _show(r.topic), _show(r.partition), _show(r.offset), _show(r.log_end), _show(r.lag),
                       r.consumer_id, r.host, r.client_id)
    print(text, file=out)


def print_share_offsets(group: GroupDescription, offsets: dict[TopicPartition, tuple[int, int]], out: TextIO,
                        err: TextIO) -> None:
    """A share group's start offset and lag per partition, as `kafka-share-groups.sh --describe`
    prints them (lag: the records not yet acknowledged)."""
    if not should_print(group.group_id, group.state, len(offsets), out, err, "Share group"):
        return
    rows = sorted(offsets.items())
    wg = max([15, len(group.group_id)])
    wt = max([15, *(len(t) for (t, _p), _v in rows)])
    fmt = f"\n%-{wg}s %-{wt}s %-10s %-13s %s"
    text = fmt % ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
    for (topic, partition), (start, lag) in rows:
        text += fmt % (group.group_id, topic, partition, _show(None if start < 0 else start),
                       _show(None if lag < 0 else lag))
    print(text, file=out)


def _assignment_text(assignment: list[TopicPartition]) -> str:
    if not assignment:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(sorted(t + "(" + ",".join(str(p) for p in sorted(ps)) + ")" for t, ps in by_topic.items()))


def print_streams_members(group: GroupDescription, out: TextIO, err: TextIO) -> None:
    """A streams group's members with their process and tasks, the columns Kafka's
    kafka-streams-groups.sh --describe --members prints."""
    if not should_print(group.group_id, group.state, len(group.members), out, err):
        return
    rows = [(group.group_id, m.member_id, m.process_id or MISSING, m.client_id,
             ",".join(m.tasks.get("active", [])) or MISSING, ",".join(m.tasks.get("standby", [])) or MISSING,
             ",".join(m.tasks.get("warmup", [])) or MISSING) for m in group.members]
    header = ("GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ACTIVE-TASKS", "STANDBY-TASKS", "WARMUP-TASKS")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = " ".join(f"%-{w}s" for w in widths)
    print("\n" + "\n".join(fmt % r for r in [header, *rows]), file=out)


def print_members(group: GroupDescription, verbose: bool, out: TextIO, err: TextIO) -> None:
    if group.group_type == "Streams":
        print_streams_members(group, out, err)
        return
    members: list[Member] = group.members
    wg, wc, wi, wh, wcl = 15, 15, 17, 15, 15
    with_instance = False
    if should_print(group.group_id, group.state, len(members), out, err):
        for m in members:
            wg = max(wg, len(group.group_id))
            wc = max(wc, len(m.member_id))
            wi = max(wi, len(m.instance_id or ""))
            wh = max(wh, len(m.host))
            wcl = max(wcl, len(m.client_id))
            with_instance = with_instance or bool(m.instance_id)
    if with_instance:
        fmt = f"%-{wg}s %-{wc}s %-{wi}s %-{wh}s %-{wcl}s %-15s "
        text = "\n" + fmt % ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    else:
        fmt = f"%-{wg}s %-{wc}s %-{wh}s %-{wcl}s %-15s "
        text = "\n" + fmt % ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    if verbose:
        text += "ASSIGNMENT"
    lines = [text]
    if group.state != "Dead":
        for m in members:
            if with_instance:
                line = fmt % (group.group_id, m.member_id, m.instance_id or "", m.host, m.client_id,
                              len(m.assignment))
            else:
                line = fmt % (group.group_id, m.member_id, m.host, m.client_id, len(m.assignment))
            lines.append(line + (_assignment_text(m.assignment) if verbose else ""))
    print("\n".join(lines), file=out)


def print_state(group: GroupDescription, out: TextIO, err: TextIO, verbose: bool = False) -> None:
    if not should_print(group.group_id, group.state, 1, out, err):
        return
    node = group.coordinator
    coordinator = f"{node.host}:{node.port}  ({node.node_id})"
    if group.group_type == "Streams":
        _print_streams_state(group, coordinator, verbose, out)
        return
    fmt = f"\n%-{max(25, len(coordinator))}s %-25s %-20s %-15s %s"
    print(fmt % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
          + fmt % (group.group_id, coordinator, group.assignor, group.state, len(group.members)), file=out)


def _print_streams_state(group: GroupDescription, coordinator: str, verbose: bool, out: TextIO) -> None:
    """The columns of Kafka's kafka-streams-groups.sh --describe --state; with --verbose the group
    and target assignment epochs too (a group whose epoch is ahead of its target is assigning)."""
    widths = [max(15, len(group.group_id)), max(25, len(coordinator)), max(15, len(group.assignor)), 25]
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNOR", "STATE"]
    row: list[object] = [group.group_id, coordinator, group.assignor, group.state]
    if verbose:
        widths += [15, 25]
        header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        epochs = group.streams
        row += ["-", "-"] if epochs is None else [epochs.group_epoch, epochs.assignment_epoch]
    fmt = "\n" + " ".join(f"%-{w}s" for w in widths) + " %s"
    print(fmt % (*header, "#MEMBERS") + fmt % (*row, len(group.members)), file=out)


def print_new_offsets(plan: dict[str, dict[TopicPartition, int]], out: TextIO) -> None:
    fmt = "\n%-30s %-30s %-10s %-15s"
    text = ""
    if plan:
        text += fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for group, offsets in plan.items():
        for (topic, partition), offset in sorted(offsets.items()):
            text += fmt % (group, topic, partition, offset)
    print(text, file=out)


def export_csv(plan: dict[str, dict[TopicPartition, int]], single_group: bool) -> str:
    """--export: Kafka's CSV, without the group column when one group was asked for."""
    lines = []
    for group, offsets in plan.items():
        for (topic, partition), offset in sorted(offsets.items()):
            lines.append(f"{topic},{partition},{offset}" if single_group else f"{group},{topic},{partition},{offset}")
    return "".join(line + "\n" for line in lines)


def print_delete_offsets_status(results: dict[TopicPartition, str | None], out: TextIO) -> None:
    fmt = "\n%-30s %-15s %-15s"
    text = fmt % ("TOPIC", "PARTITION", "STATUS")
    for (topic, partition), error in sorted(results.items(), key=lambda kv: kv[0][0] + str(kv[0][1])):
        text += fmt % (topic, partition if partition >= 0 else "Not Provided",
                       f"Error: :{error}" if error is not None else "Successful")
    print(text, file=out)
