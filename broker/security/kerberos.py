"""Kerberos principals as Kafka names them: ``sasl.kerberos.principal.to.local.rules`` turn
``alice@EXAMPLE.COM`` or ``kafka-client/host@EXAMPLE.COM`` into the short name of ``User:<name>``,
as Kafka's ``KerberosShortNamer`` applies them (Hadoop's auth_to_local syntax): ``DEFAULT`` (a
principal of the default realm becomes its first component) and
``RULE:[n:format](match)s/from/to/g`` with ``/L`` or ``/U``, first match wins; a principal no rule
maps is refused."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_RULE = re.compile(r"((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))")
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE = re.compile(r"[/@]")


class NoMatchingRule(ValueError):
    """No rule maps the principal (Kafka's NoMatchingRule)."""


@dataclass(frozen=True)
class KerberosRule:
    is_default: bool
    components: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    from_pattern: re.Pattern[str] | None = None
    to: str = ""
    repeat: bool = False
    lower: bool = False
    upper: bool = False

    def apply(self, params: list[str], default_realm: str) -> str | None:
        result: str | None = None
        if self.is_default:
            if params[0] == default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = _replace_parameters(self.format, params)
            if self.match is None or self.match.fullmatch(base):
                if self.from_pattern is None:
                    result = base
                else:
                    java_to = re.sub(r"\$(\d)", r"\\\1", self.to)
                    result = self.from_pattern.sub(java_to, base, count=0 if self.repeat else 1)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"Non-simple name {result} after auth_to_local rule")
        if result is not None and self.lower:
            result = result.lower()
        elif result is not None and self.upper:
            result = result.upper()
        return result


def _replace_parameters(fmt: str, params: list[str]) -> str:
    out = []
    for match in _PARAMETER.finditer(fmt):
        out.append(match[1])
        if match[3]:
            index = int(match[3])
            if index >= len(params):
                raise NoMatchingRule(f"index {index} from {fmt} is outside of the valid range 0 to {len(params) - 1}")
            out.append(params[index])
    return "".join(out)


def parse_rules(text: str) -> list[KerberosRule]:
    """Raises ValueError for what is not a rule."""
    rules: list[KerberosRule] = []
    rest = text.strip()
    while rest:
        match = _RULE.match(rest)
        if match is None:
            raise ValueError(f"Invalid rule: {rest}")
        if match[2]:
            rules.append(KerberosRule(True))
        else:
            rules.append(KerberosRule(
                False, int(match[5]), match[6], re.compile(match[8]) if match[8] is not None else None,
                re.compile(match[10]) if match[10] is not None else None, match[11] or "", match[12] == "g",
                match[13] == "L", match[13] == "U"))
        rest = rest[match.end():].lstrip().lstrip(",").lstrip()
    return rules


class KerberosShortNamer:
    def __init__(self, rules: str, default_realm: str) -> None:
        self.text = rules
        self.rules = parse_rules(rules)
        self.default_realm = default_realm

    def short_name(self, principal: str) -> str:
        """``alice@REALM`` -> ``alice``; raises NoMatchingRule."""
        name, _, realm = principal.partition("@")
        if not realm:
            return name  # Kafka: a name without realm is its own short name
        params = [realm, *name.split("/")]
        for rule in self.rules:
            result = rule.apply(params, self.default_realm)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {principal}, rules {self.text}")


def default_realm(config: Path | None = None) -> str:
    """The ``default_realm`` of the Kerberos configuration the GSS library reads (``KRB5_CONFIG``,
    else /etc/krb5.conf); "" without one."""
    path = config or Path(os.environ.get("KRB5_CONFIG", "/etc/krb5.conf").split(":")[0])
    try:
        text = path.read_text()
    except OSError:
        return ""
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
        elif section == "libdefaults" and "=" in stripped:
            key, _, value = stripped.partition("=")
            if key.strip() == "default_realm":
                return value.strip()
    return ""
