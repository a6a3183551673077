"""--reset-offsets: which partitions a reset covers and the offsets it moves them to, by Kafka's
rules (kafka-consumer-groups.sh): --to-offset and --shift-by are clamped to the log's range,
--to-datetime and --by-duration take the first record at or after the time (the log end when
there is none), --to-current keeps committed offsets and puts the others at the log end."""

from __future__ import annotations

import re
import sys
import time
from datetime import datetime
from typing import Any, TextIO

from kclient.admin_client import EARLIEST, LATEST, KafkaAdmin, TopicPartition

SCENARIOS = ("to_offset", "to_datetime", "by_duration", "to_earliest", "to_latest", "to_current", "shift_by")

_DURATION = re.compile(r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d+)?)S)?)?$",
                       re.IGNORECASE)


class UsageError(Exception):
    """A wrong combination of options: printed with the usage, exit status 1, as Kafka does."""


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMnS) -> milliseconds."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise UsageError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, hours, minutes, seconds = m.groups()
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    total += round(float(seconds or 0) * 1000)
    return -total if sign == "-" else total


def parse_datetime_ms(text: str) -> int:
    """'YYYY-MM-DDTHH:mm:SS.sss' with an optional zone (Z, +hh:mm); local time without one."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"Error parsing timestamp. It does not conform to the format 'yyyy-MM-ddTHH:mm:ss.SSS': "
                         f"{text}") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return int(parsed.timestamp() * 1000)


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """--topic t or --topic t:0,1,2."""
    if ":" not in arg:
        return arg, None
    parts = arg.split(":")
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    topic, partitions = parts
    out = []
    for p in partitions.split(","):
        try:
            out.append(int(p))
        except ValueError:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
    return topic, out


def partitions_to_reset(admin: KafkaAdmin, group: str, args: Any) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(admin.committed_offsets(group))
    if args.topic:
        chosen: list[TopicPartition] = []
        whole: list[str] = []
        for arg in args.topic:
            topic, partitions = parse_topic_arg(arg)
            if partitions is None:
                whole.append(topic)
            else:
                chosen.extend((topic, p) for p in partitions)
        for topic, numbers in admin.partitions(whole).items():
            chosen.extend((topic, p) for p in numbers)
        return chosen
    raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _clamped(admin: KafkaAdmin, requested: dict[TopicPartition, int], err: TextIO) -> dict[TopicPartition, int]:
    starts = admin.list_offsets(requested, EARLIEST)
    ends = admin.list_offsets(requested, LATEST)
    out = {}
    for tp, offset in requested.items():
        if tp not in ends:
            raise RuntimeError(f"Unexpected non-existing offset value for topic partition {_tp(tp)}")
        if offset > ends[tp]:
            print(f"WARN New offset ({offset}) is higher than latest offset for topic partition {_tp(tp)}. "
                  f"Value will be set to {ends[tp]}", file=err)
            out[tp] = ends[tp]
        elif tp in starts and offset < starts[tp]:
            print(f"WARN New offset ({offset}) is lower than earliest offset for topic partition {_tp(tp)}. "
                  f"Value will be set to {starts[tp]}", file=err)
            out[tp] = starts[tp]
        else:
            out[tp] = offset
    return out


def _log_offsets(admin: KafkaAdmin, partitions: list[TopicPartition], spec: int, what: str) -> dict[TopicPartition, int]:
    found = admin.list_offsets(partitions, spec)
    for tp in partitions:
        if tp not in found:
            raise UsageError(f"Error getting {what} of topic partition: {_tp(tp)}")
    return {tp: found[tp] for tp in partitions}


def _at_time(admin: KafkaAdmin, partitions: list[TopicPartition], timestamp: int,
             out: TextIO) -> dict[TopicPartition, int]:
    found = admin.list_offsets(partitions, timestamp)
    empty = [tp for tp in partitions if found.get(tp, -1) == -1]
    for topic, partition in empty:
        print(f"\nWarn: Partition {partition} from topic {topic} is empty. Falling back to latest known offset.",
              file=out)
    result = {tp: found[tp] for tp in partitions if tp not in empty}
    result.update(_log_offsets(admin, empty, LATEST, "offset by timestamp"))
    return result


def plan_reset(admin: KafkaAdmin, group: str, partitions: list[TopicPartition], args: Any,
               out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> dict[TopicPartition, int]:
    """The new offset of each partition for the scenario ``args`` names."""
    if args.to_offset is not None:
        return _clamped(admin, dict.fromkeys(partitions, args.to_offset), err)
    if args.to_earliest:
        return _log_offsets(admin, partitions, EARLIEST, "starting offset")
    if args.to_latest:
        return _log_offsets(admin, partitions, LATEST, "ending offset")
    if args.shift_by is not None:
        committed = admin.committed_offsets(group)
        requested = {}
        for tp in partitions:
            if tp not in committed:
                raise UsageError(f"Cannot shift offset for partition {_tp(tp)} since there is no current "
                                 "committed offset")
            requested[tp] = committed[tp] + args.shift_by
        return _clamped(admin, requested, err)
    if args.to_datetime is not None:
        return _at_time(admin, partitions, parse_datetime_ms(args.to_datetime), out)
    if args.by_duration is not None:
        return _at_time(admin, partitions, int(time.time() * 1000) - parse_duration_ms(args.by_duration), out)
    if args.to_current:
        committed = admin.committed_offsets(group)
        kept = {tp: committed[tp] for tp in partitions if tp in committed}
        kept.update(_log_offsets(admin, [tp for tp in partitions if tp not in committed], LATEST, "ending offset"))
        return kept
    raise UsageError("Option '[reset-offsets]' requires one of the following scenarios: "
                     "[to-offset, to-datetime, by-duration, to-earliest, to-latest, to-current, shift-by, from-file]")
