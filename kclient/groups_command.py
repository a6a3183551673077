"""`kcoord groups`: list, describe, reset, delete consumer groups and their offsets, modeled on
Kafka's `kafka-consumer-groups.sh` (same options, checks, columns and messages), over the wire
protocol only, so it works against kcoord and against any Kafka broker.

Each action is one entry of ``ACTIONS`` (option name -> handler) with its options added in
``add_parser``; a new action adds its option there and its handler to ``ACTIONS``, and the rule
"exactly one action" covers it without more code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TextIO

from kclient import group_history
from kclient.admin_client import (
    EARLIEST,
    LATEST,
    AdminError,
    GroupDescription,
    KafkaAdmin,
    TopicPartition,
    error_name,
)
from kclient.groups_output import (
    MISSING,
    OffsetRow,
    export_csv,
    print_delete_offsets_status,
    print_error,
    print_listing,
    print_members,
    print_new_offsets,
    print_offsets,
    print_share_offsets,
    print_state,
)
from kclient.offset_reset import SCENARIOS, UsageError, partitions_to_reset, plan_reset

STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling",
          "NotReady")
TYPES = ("Consumer", "Classic", "Share", "Streams")

Handler = Callable[[KafkaAdmin, argparse.Namespace, TextIO, TextIO], int]


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


# ---- actions ---------------------------------------------------------------------------------

def _split(value: str | None, known: tuple[str, ...], what: str) -> list[str]:
    if not value:
        return []
    wanted = [v.strip() for v in value.split(",")]
    by_lower = {k.lower(): k for k in known}
    if any(v.lower() not in by_lower for v in wanted):
        raise UsageError(f"Invalid {what} list '{value}'. Valid {what}s are: {', '.join(known)}")
    return [by_lower[v.lower()] for v in wanted]


def list_groups(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    include_state, include_type = args.state is not None, args.type is not None
    if not (include_state or include_type):
        for g in admin.list_groups():
            print(g.group_id, file=out)
        return 0
    states = _split(args.state or None, STATES, "state")
    types = _split(args.type or None, TYPES, "type")
    groups = admin.list_groups(states, [t.lower() for t in types])
    # A broker that predates the filters answers with every group: filter here too.
    groups = [g for g in groups if (not states or g.state in states) and (not types or g.group_type in types)]
    print_listing(groups, include_type, include_state, out)
    return 0


def _group_ids(admin: KafkaAdmin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return sorted(g.group_id for g in admin.list_groups())
    return list(dict.fromkeys(args.group))


def offset_rows(admin: KafkaAdmin, group: GroupDescription) -> list[OffsetRow]:
    """One row per partition: those of members with an assignment (most partitions first), then
    the committed partitions no member holds, with log end offsets from the partition leaders."""
    committed = admin.committed_offsets(group.group_id)
    assigned: set[TopicPartition] = set()
    owners: list[tuple[list[TopicPartition], str, str, str]] = []
    for m in sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment)):
        owners.append((sorted(m.assignment), m.member_id, m.host, m.client_id))
        assigned.update(m.assignment)
    rest = sorted(tp for tp in committed if tp not in assigned)
    if rest:
        owners.append((rest, MISSING, MISSING, MISSING))
    partitions = [tp for tps, *_ in owners for tp in tps]
    ends = admin.list_offsets(partitions, LATEST)
    behind = [tp for tp in partitions if committed.get(tp, -1) >= 0]
    starts = admin.list_offsets(behind, EARLIEST) if behind else {}
    return [OffsetRow(group.group_id, t, p, committed.get((t, p)), ends.get((t, p)), cid, host, client,
                      starts.get((t, p))) for tps, cid, host, client in owners for t, p in tps]


def describe(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    status = 0
    for group_id in sorted(_group_ids(admin, args)):
        group = admin.describe_group(group_id)
        status |= group.state == "Dead"
        if args.members:
            print_members(group, args.verbose, out, err)
        elif args.state is not None:
            print_state(group, out, err, verbose=args.verbose)
        elif group.group_type == "Share":
            print_share_offsets(group, admin.share_offsets(group_id), out, err)
        else:
            print_offsets(group, offset_rows(admin, group), out, err)
    return status


def reset_offsets(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    plan: dict[str, dict[TopicPartition, int]] = {}
    status = 0
    for group_id in _group_ids(admin, args):
        state = admin.describe_group(group_id).state
        if state not in ("Empty", "Dead"):
            print_error(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                        f"state is {state}.", out)
            plan[group_id] = {}
            status = 1
            continue
        offsets = plan_reset(admin, group_id, partitions_to_reset(admin, group_id, args), args, out, err)
        if args.execute:
            failed = {tp: code for tp, code in admin.alter_offsets(group_id, offsets).items() if code}
            if failed:
                raise AdminError(next(iter(failed.values())),
                                 ", ".join(f"{t}-{p}: {error_name(c)}" for (t, p), c in sorted(failed.items())))
        plan[group_id] = offsets
    if args.export:
        print(export_csv(plan, len(args.group or []) == 1), file=out)
    else:
        print_new_offsets(plan, out)
    return status


def delete_groups(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    results = admin.delete_groups(_group_ids(admin, args))
    ok = [g for g, code in results.items() if code == 0]
    failed = {g: code for g, code in results.items() if code}
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(ok)}') was successful.", file=out)
        return 0
    print_error("Deletion of some consumer groups failed:", out)
    for group, code in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {error_name(code)}", file=out)
    if ok:
        print(f"\nThese consumer groups were deleted successfully: '{', '.join(ok)}'", file=out)
    return 1


_DELETE_OFFSETS_ERRORS = {
    "INVALID_GROUP_ID": "'{g}' is not valid.",
    "GROUP_ID_NOT_FOUND": "'{g}' does not exist.",
    "GROUP_AUTHORIZATION_FAILED": "Access to '{g}' is not authorized.",
    "NON_EMPTY_GROUP": "Deleting offsets of a consumer group '{g}' is forbidden if the group is not empty.",
    "GROUP_SUBSCRIBED_TO_TOPIC": "Encounter some partition level error, see the follow-up details:",
    "TOPIC_AUTHORIZATION_FAILED": "Encounter some partition level error, see the follow-up details:",
    "UNKNOWN_TOPIC_OR_PARTITION": "Encounter some partition level error, see the follow-up details:",
}


def delete_offsets(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kclient.offset_reset import parse_topic_arg

    group_id = args.group[0]
    partitions: list[TopicPartition] = []
    results: dict[TopicPartition, str | None] = {}
    for arg in args.topic:
        topic, numbers = parse_topic_arg(arg)
        if numbers is not None:
            partitions.extend((topic, p) for p in numbers)
            continue
        try:
            partitions.extend((topic, p) for p in admin.partitions([topic])[topic])
        except AdminError as exc:
            results[(topic, -1)] = exc.name
    code, per_partition = admin.delete_offsets(group_id, partitions)
    first_partition_error = next((c for c in per_partition.values() if c), 0)
    top = code or first_partition_error
    for tp in partitions:
        c = per_partition.get(tp, code)
        results[tp] = error_name(c) if c else None
    if top == 0:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group_id}", file=out)
    else:
        name = error_name(top)
        print_error(_DELETE_OFFSETS_ERRORS.get(name, "Encounter some unknown error: " + name).format(g=group_id), out)
    print_delete_offsets_status(results, out)
    return 0 if top == 0 else 1


def history(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """kcoord only: the group's rebalance journal (``kclient/group_history.py``)."""
    return group_history.show(args.bootstrap_server, args.group[0], history=True, doctor=False, out=out)


def doctor(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """kcoord only: the doctor's findings for the group, or every group."""
    group = args.group[0] if args.group else None
    return group_history.show(args.bootstrap_server, group, history=False, doctor=True, out=out)


ACTIONS: dict[str, Handler] = {
    "list": list_groups,
    "describe": describe,
    "delete": delete_groups,
    "reset_offsets": reset_offsets,
    "delete_offsets": delete_offsets,
    "history": history,
    "doctor": doctor,
}


# ---- options ---------------------------------------------------------------------------------

def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("groups", help="list, describe, reset and delete consumer groups "
                       "(like kafka-consumer-groups.sh; any Kafka broker)")
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--group", action="append", help="The consumer group we wish to act on (repeatable).")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--topic", action="append", help="Topic (reset-offsets: topic or topic:0,1,2; repeatable).")
    p.add_argument("--all-topics", action="store_true", help="Every topic the group has offsets for (reset).")
    p.add_argument("--timeout", type=int, default=5000, help="Request timeout in ms (default 5000).")
    actions = p.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="List all consumer groups.")
    actions.add_argument("--describe", action="store_true", help="Describe consumer group and list offset lag.")
    actions.add_argument("--delete", action="store_true", help="Delete groups (offsets and ownership).")
    actions.add_argument("--reset-offsets", action="store_true", help="Reset offsets of inactive groups.")
    actions.add_argument("--delete-offsets", action="store_true", help="Delete offsets of a group for topics.")
    actions.add_argument("--history", action="store_true", help="kcoord only: the group's rebalances and "
                         "membership changes, with causes and stall times, from the rebalance journal.")
    actions.add_argument("--doctor", action="store_true", help="kcoord only: findings and recommendations from "
                         "the rebalance journal (every group unless --group).")
    describe_opts = p.add_argument_group("describe")
    describe_opts.add_argument("--members", action="store_true", help="Describe members of the group.")
    describe_opts.add_argument("--verbose", action="store_true",
                               help="With --members: each member's partitions; with --state: a streams group's epochs.")
    describe_opts.add_argument("--offsets", action="store_true", help="Partitions with their lag (the default).")
    describe_opts.add_argument("--state", nargs="?", const="", default=None,
                               help="With --describe the group's state; with --list the state of every group, "
                               "or only groups in these states (comma-separated).")
    describe_opts.add_argument("--type", nargs="?", const="", default=None,
                               help="With --list: the type of every group, or only these types "
                               "(classic,consumer,streams).")
    reset = p.add_argument_group("reset-offsets")
    reset.add_argument("--dry-run", action="store_true", help="Only show the new offsets (the default).")
    reset.add_argument("--execute", action="store_true", help="Commit the new offsets.")
    reset.add_argument("--export", action="store_true", help="Print the plan as CSV.")
    reset.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset.")
    reset.add_argument("--to-datetime", help="Reset to the offset of a time: 'YYYY-MM-DDTHH:mm:SS.sss'.")
    reset.add_argument("--by-duration", help="Reset to the offset of now minus a duration: 'PnDTnHnMnS'.")
    reset.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    reset.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    reset.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    reset.add_argument("--shift-by", type=int, help="Shift the current offset by n (may be negative).")
    p.set_defaults(func=run)
    return p


def check_args(args: argparse.Namespace) -> str:
    """Kafka's option checks (ConsumerGroupCommandOptions.checkArgs); returns the action."""
    chosen = [name for name in ACTIONS if getattr(args, name, False)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: "
                         + ", ".join(_option(name) for name in ACTIONS))
    action = chosen[0]
    scope = "--group, --all-groups"
    if args.group and args.all_groups:
        raise UsageError("Option \"[group]\" can't be used with option \"[all-groups]\"")
    if action in ("describe", "delete", "reset_offsets") and not (args.group or args.all_groups):
        raise UsageError(f"Option {_option(action)} takes one of these options: {scope}")
    if action == "describe":
        if sum(bool(x) for x in (args.members, args.offsets, args.state is not None)) > 1:
            raise UsageError("Option --describe takes at most one of these options: --members, --offsets, --state")
        if args.state:
            raise UsageError("Option --describe does not take a value for --state")
    elif any((args.members, args.offsets, args.verbose)):
        raise UsageError("Options --members, --offsets and --verbose may be used with --describe only")
    if args.state is not None and action not in ("describe", "list"):
        raise UsageError("Option --state may be used with --describe and --list only")
    if args.type is not None and action != "list":
        raise UsageError("Option --type may be used with --list only")
    if action == "delete" and args.topic:
        raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if action == "delete_offsets" and not (args.group and args.topic):
        raise UsageError("Option --delete-offsets takes the following options: --group, --topic")
    if action == "history" and (not args.group or len(args.group) > 1):
        raise UsageError("Option --history takes one --group")
    if action == "doctor" and args.group and len(args.group) > 1:
        raise UsageError("Option --doctor takes at most one --group")
    if action == "delete_offsets" and len(args.group) > 1:
        raise UsageError("Option --delete-offsets supports one consumer group at a time")
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise UsageError("Option --reset-offsets only accepts one of --execute and --dry-run")
        given = [s for s in SCENARIOS if getattr(args, s) not in (None, False)]
        if len(given) > 1:
            raise UsageError(f"Option {_option(given[0])} can't be used with option {_option(given[1])}")
    else:
        reset_only = [s for s in (*SCENARIOS, "dry_run", "execute", "export", "all_topics")
                      if getattr(args, s) not in (None, False)]
        if reset_only:
            raise UsageError(f"Option {_option(reset_only[0])} may be used with --reset-offsets only")
        if args.topic and action not in ("delete_offsets",):
            raise UsageError(f"Option --topic can't be used with option {_option(action)}")
    return action


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Exit status: 0 on success; 1 for a usage error (printed to stderr) or when the command
    printed an error (a refused reset, a missing group, a failed deletion)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        action = check_args(args)
        if action == "reset_offsets" and not (args.dry_run or args.execute):
            print("WARN: No action will be performed as the --execute option is missing. In a future major release, "
                  "the default behavior of this command will be to prompt the user before executing the reset "
                  "rather than doing a dry run. You should add the --dry-run option explicitly if you are "
                  "scripting this command and want to keep the current default behavior without prompting.",
                  file=err)
        with KafkaAdmin(args.bootstrap_server, timeout=args.timeout / 1000) as admin:
            return ACTIONS[action](admin, args, out, err)
    except UsageError as exc:
        print(f"kcoord groups: {exc}", file=err)
        return 1
    except (AdminError, OSError, ConnectionError, RuntimeError) as exc:
        print_error(f"Executing consumer group command failed due to {exc}", out)
        return 1
