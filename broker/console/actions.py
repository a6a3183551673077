"""The console's actions: reset a group's offsets, delete its offsets, delete the group. Each runs
``kcoord groups``' own code (``kclient.groups_command``: its options, checks, requests and messages)
as the signed-in user would run it, and every request that code sends is first put to the rule the
broker's API table gives that API (``RequestChecks``, the broker's authorizer) with the user's
principal and address: a request the rule would refuse on the wire stops the action before it is
sent, so nothing changes; parts of an answer the user may not see are removed as the rule removes
them. With the authorizer off, as on the wire, a signed-in user may do everything.

The form fields become ``kcoord groups`` options; what the command would refuse as a usage error is
refused here as bad input, before anything is sent."""

from __future__ import annotations

import argparse
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kclient import groups_command
from kclient.admin_client import AdminError, KafkaAdmin, error_name
from kclient.offset_reset import UsageError, parse_datetime_ms, parse_topic_arg
from protocol.schema import Data

ACTIONS = ("reset-offsets", "delete-offsets", "delete-group")
# A reset's target: the form's choice -> the kcoord groups option that takes it (and its value).
RESET_TO = {"earliest": "--to-earliest", "latest": "--to-latest", "datetime": "--to-datetime",
            "shift": "--shift-by", "offset": "--to-offset"}
MAX_FIELD = 1024
_WHOLE_NUMBER = re.compile(r"^[-+]?\d{1,18}$")
CLIENT_ID = "kcoord-console"

# What an answer the user may see is made of: the rule's change to it, or None.
Amend = Callable[[Data], Data]
# Puts one request (API key, version, body) to its rule for the signed-in user; raises Denied.
Guard = Callable[[int, int, Data], Amend | None]


class BadInput(Exception):
    """A form the action cannot take: 400, nothing sent."""


class Denied(Exception):
    """A request of the action that the API's authorization rule refuses for the user: 403."""


@dataclass(frozen=True)
class Outcome:
    """How an action ended: the HTTP status, a one-line summary and what kcoord groups printed."""

    status: int
    summary: str
    output: str


def _field(form: dict[str, list[str]], name: str, required: bool = False) -> str:
    values = form.get(name, [])
    if len(values) > 1:
        raise BadInput(f"The field '{name}' is given {len(values)} times.")
    value = values[0].strip() if values else ""
    if len(value) > MAX_FIELD:
        raise BadInput(f"The field '{name}' is longer than {MAX_FIELD} characters.")
    if required and not value:
        raise BadInput(f"The field '{name}' is required.")
    return value


def _topic_option(topic: str) -> list[str]:
    try:
        parse_topic_arg(topic)
    except UsageError as exc:
        raise BadInput(str(exc)) from None
    return ["--topic", topic]


def command_line(action: str, group_id: str, form: dict[str, list[str]]) -> list[str]:
    """The ``kcoord groups`` options (without --bootstrap-server) an action's form stands for."""
    known = {"reset-offsets": {"topic", "to", "value"}, "delete-offsets": {"topic"}, "delete-group": set()}
    if action not in known:
        raise BadInput(f"Unknown action '{action}': the console does {', '.join(ACTIONS)}.")
    unknown = sorted(set(form) - known[action] - {"group"})
    if unknown:
        raise BadInput(f"Unknown field '{unknown[0]}' for {action}.")
    group = ["--group", group_id]
    if action == "delete-group":
        return ["--delete", *group]
    topic = _field(form, "topic", required=action == "delete-offsets")
    if action == "delete-offsets":
        return ["--delete-offsets", *group, *_topic_option(topic)]
    scope = _topic_option(topic) if topic else ["--all-topics"]
    to = _field(form, "to", required=True)
    if to not in RESET_TO:
        raise BadInput(f"Reset to what? 'to' is one of {', '.join(RESET_TO)}, not '{to}'.")
    option = [RESET_TO[to]]
    if to in ("shift", "offset"):
        value = _field(form, "value", required=True)
        if not _WHOLE_NUMBER.match(value):
            what = "A shift" if to == "shift" else "An offset"
            raise BadInput(f"{what} is a whole number of records (e.g. -10), not '{value}'.")
        option = [f"{option[0]}={int(value)}"]
    elif to == "datetime":
        value = _field(form, "value", required=True)
        try:
            parse_datetime_ms(value)
        except UsageError as exc:
            raise BadInput(str(exc)) from None
        option.append(value)
    return ["--reset-offsets", "--execute", *group, *scope, *option]


def _parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="kcoord")
    groups_command.add_parser(root.add_subparsers(dest="command"))
    return root


class GuardedAdmin(KafkaAdmin):
    """``KafkaAdmin`` whose every request is first put to ``guard``: refused, it is never sent;
    allowed, its answer is changed as the rule changes it for the user."""

    def __init__(self, bootstrap: str, guard: Guard, timeout: float) -> None:
        self.guard = guard  # before the base class connects: its Metadata request is guarded too
        super().__init__(bootstrap, timeout=timeout, client_id=CLIENT_ID)

    def call(self, node_id: int, api_key: int, build: Callable[[int], Data]) -> Data:
        amends: list[Amend | None] = []

        def guarded(version: int) -> Data:
            body = build(version)
            amends.append(self.guard(api_key, version, body))
            return body

        response: Data = super().call(node_id, api_key, guarded)
        amend = amends[-1] if amends else None
        return amend(response) if amend is not None else response


class Admins(Protocol):
    def __call__(self, bootstrap: str, guard: Guard, timeout: float) -> KafkaAdmin: ...


def run(bootstrap: str, options: Sequence[str], guard: Guard, admins: Admins = GuardedAdmin) -> Outcome:
    """Runs ``kcoord groups`` with ``options`` through a guarded admin client (blocks: sockets)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        args = _parser().parse_args(["groups", "--bootstrap-server", bootstrap, *options])
        action = groups_command.check_args(args)
        with admins(bootstrap, guard, args.timeout / 1000) as admin:
            status = groups_command.ACTIONS[action](admin, args, out, err)
    except UsageError as exc:
        return Outcome(400, str(exc), out.getvalue() + err.getvalue())
    except Denied as exc:
        return Outcome(403, str(exc), "")
    except AdminError as exc:
        # The console's own connection may be refused what the user is allowed (docs/console.md).
        status = 403 if exc.name.endswith("AUTHORIZATION_FAILED") else 409
        return Outcome(status, f"The broker refused it: {exc}", out.getvalue() + err.getvalue())
    except (OSError, ConnectionError, RuntimeError) as exc:
        return Outcome(503, f"The cluster could not be reached: {exc}", out.getvalue() + err.getvalue())
    text = out.getvalue() + err.getvalue()
    if status == 0:
        return Outcome(200, "Done.", text)
    return Outcome(409, "kcoord groups refused it (see below); nothing was changed by the refused part.", text)


def denial(principal: str, api_name: str, code: int) -> Denied:
    reason = error_name(code) if code else "part of the request is not authorized"
    return Denied(f"{principal} may not do this: the broker's authorization refuses its {api_name} request "
                  f"({reason}), as it would refuse it from this user's own client.")
