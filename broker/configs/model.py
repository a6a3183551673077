"""What a config is: Kafka's numbers for resource types, config sources and types, and one
definition per config name (its type, default, documentation, validation, synonyms)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    """ConfigResource.Type."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """DescribeConfigsResponse.ConfigSource."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """DescribeConfigsResponse.ConfigType (ConfigDef.Type, UNKNOWN when not said)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigOp(IntEnum):
    """IncrementalAlterConfigs' operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class InvalidValue(ValueError):
    """A value a config does not accept; the message says why (Kafka's wording where it matters)."""


Check = Callable[[object], None]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def at_least(low: float) -> Check:
    def check(value: object) -> None:
        assert isinstance(value, (int, float))
        if value < low:
            raise InvalidValue(f"Value must be at least {_num(low)}")
    return check


def between(low: float, high: float) -> Check:
    def check(value: object) -> None:
        assert isinstance(value, (int, float))
        if value < low:
            raise InvalidValue(f"Value must be at least {_num(low)}")
        if value > high:
            raise InvalidValue(f"Value must be no more than {_num(high)}")
    return check


def one_of(*choices: str) -> Check:
    def check(value: object) -> None:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item not in choices:
                raise InvalidValue(f"String must be one of: {', '.join(choices)}")
    return check


@dataclass(frozen=True)
class ConfigDef:
    """One config of a resource type. ``default`` is the text DescribeConfigs shows when nothing
    overrides it (None: no value); ``synonyms`` are the broker properties behind a topic's or a
    group's config, most specific first (Kafka's synonyms)."""

    name: str
    type: ConfigType
    default: str | None
    doc: str
    check: Check | None = None
    synonyms: tuple[str, ...] = ()
    sensitive: bool = False

    def parse(self, text: str | None) -> object:
        """The value ``text`` holds, checked; raises ``InvalidValue`` with the reason."""
        if text is None:
            raise InvalidValue("Value must not be null")
        raw = text.strip()
        value: object
        try:
            if self.type is ConfigType.BOOLEAN:
                if raw.lower() not in ("true", "false"):
                    raise InvalidValue("Expected value to be either true or false")
                value = raw.lower() == "true"
            elif self.type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
                value = int(raw)
                low, high = ((INT_MIN, INT_MAX) if self.type is not ConfigType.LONG else (LONG_MIN, LONG_MAX))
                if not low <= value <= high:
                    raise InvalidValue(f"Not a number of type {self.type.name}")
            elif self.type is ConfigType.DOUBLE:
                value = float(raw)
            elif self.type is ConfigType.LIST:
                value = [item.strip() for item in raw.split(",") if item.strip()] if raw else []
            else:
                value = text
        except ValueError as exc:
            if isinstance(exc, InvalidValue):
                raise
            raise InvalidValue(f"Not a number of type {self.type.name}") from None
        if self.check is not None:
            self.check(value)
        return value


def type_of(value: object) -> ConfigType:
    """The type of a broker property from its Python default (kcoord's own properties)."""
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, int):
        return ConfigType.INT if INT_MIN <= value <= INT_MAX else ConfigType.LONG
    if isinstance(value, float):
        return ConfigType.DOUBLE
    return ConfigType.STRING
