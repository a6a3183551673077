"""The configs of topics, brokers and groups: what DescribeConfigs shows of each (value, source,
synonyms), and changing them (AlterConfigs replaces a resource's whole set, IncrementalAlterConfigs
changes single configs), validated as Kafka 4.4 validates them, persisted before the answer and
handed to what obeys them (the topic logs, the data plane, the group coordinator).

A value comes from the first layer that has it: the topic's (or group's) own config, then the
broker property behind it (its synonym): set dynamically on this broker, set dynamically as the
cluster-wide default (broker ""), given at startup, or its default."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from broker.configs.broker_defs import BROKER_DEFS, DYNAMIC_BROKER_CONFIGS
from broker.configs.group_defs import FIXED_RANGES, GROUP_DEFS, check_group_configs
from broker.configs.group_defs import INTERNAL as INTERNAL_GROUP_CONFIGS
from broker.configs.model import ConfigDef, ConfigOp, ConfigSource, ConfigType, InvalidValue, ResourceType
from broker.configs.store import BROKERS, GROUPS, DynamicConfigStore
from broker.configs.topic_defs import TOPIC_DEFS
from broker.network.connection_limits import ConnectionLimits, parse_overrides
from broker.share_partitions.core.partition import Limits
from broker.share_partitions.core.settings import LATEST, Reset, ShareGroupSettings, parse_reset
from broker.topics.catalog import Topic, TopicCatalog
from broker.topics.partitions import topic_log_config
from protocol.errors import ErrorCode
from storage.config import LogConfig

Synonym = tuple[str, str | None, ConfigSource]


@dataclass(frozen=True)
class Described:
    """One config as DescribeConfigs shows it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str
    read_only: bool
    sensitive: bool
    synonyms: tuple[Synonym, ...]


class ConfigError(Exception):
    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class Change:
    """One config of an IncrementalAlterConfigs request (AlterConfigs' are all SET)."""

    name: str
    op: int
    value: str | None


# The topic configs the storage layer reads (LogConfig's fields), by Kafka name.
_LOG_NAMES = frozenset(LogConfig().to_kafka())
# Broker loggers: kcoord has one log, shown as Kafka's root logger, with Kafka's level names.
ROOT_LOGGER = "root"
LOG4J_LEVELS = ("DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN")
_TO_PYTHON = {"TRACE": "DEBUG", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARNING", "ERROR": "ERROR",
              "FATAL": "CRITICAL"}
_FROM_PYTHON = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARN", "ERROR": "ERROR"}


class ConfigService:
    def __init__(self, node_id: int, catalog: TopicCatalog, store: DynamicConfigStore,
                 static: Mapping[str, str], given: Iterable[str], group_ranges: Mapping[str, tuple[int, int]], *,
                 on_topic: Callable[[Topic], None], on_defaults: Callable[[], None],
                 on_groups: Callable[[], None], on_log_level: Callable[[str], None] = lambda _level: None) -> None:
        """``static`` is every broker property's text as the broker started, ``given`` the names
        set explicitly (file, environment, overrides); ``group_ranges`` the bounds of the group
        configs taken from the broker's min and max properties. The ``on_*`` callbacks apply a
        change once it is durable."""
        self.node_id = node_id
        self.catalog = catalog
        self.store = store
        self.static = dict(static)
        self.given = frozenset(given)
        self.group_ranges = {**FIXED_RANGES, **group_ranges}
        self.on_topic = on_topic
        self.on_defaults = on_defaults
        self.on_groups = on_groups
        self.on_log_level = on_log_level
        # The root logger's level as Kafka names it; changed until the broker restarts, as Kafka's.
        self.log_level = _FROM_PYTHON.get(self.static.get("log.level", "INFO"), "INFO")
        # Share groups' effective settings, read on every share fetch: forgotten on every change.
        self._share_settings: dict[str, ShareGroupSettings] = {}

    # ---- layers ---------------------------------------------------------------------------------

    def broker_layers(self, name: str) -> list[Synonym]:
        """Every value the broker property ``name`` has, most specific first."""
        layers: list[Synonym] = []
        own = self.store.get(BROKERS, str(self.node_id)).get(name)
        if own is not None:
            layers.append((name, own, ConfigSource.DYNAMIC_BROKER_CONFIG))
        cluster = self.store.get(BROKERS, "").get(name)
        if cluster is not None:
            layers.append((name, cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name in self.given and name in self.static:
            layers.append((name, self.static[name], ConfigSource.STATIC_BROKER_CONFIG))
        definition = BROKER_DEFS.get(name)
        if definition is not None and (definition.default is not None or definition.sensitive):
            layers.append((name, definition.default, ConfigSource.DEFAULT_CONFIG))
        return layers

    def _synonym_layers(self, definition: ConfigDef) -> list[Synonym]:
        layers: list[Synonym] = []
        for synonym in definition.synonyms:
            found = self.broker_layers(synonym)
            layers += found if found else [(synonym, definition.default, ConfigSource.DEFAULT_CONFIG)]
        return layers

    def default_of(self, definition: ConfigDef) -> str | None:
        """What a topic or group config is when the resource does not set it."""
        layers = self._synonym_layers(definition)
        return layers[0][1] if layers else definition.default

    def connection_limits(self) -> ConnectionLimits:
        """max.connections, max.connections.per.ip and its overrides as they are now (each checked
        when it was set)."""
        def value(name: str) -> str:
            return self.broker_layers(name)[0][1] or ""
        return ConnectionLimits(int(value("max.connections")), int(value("max.connections.per.ip")),
                                parse_overrides(value("max.connections.per.ip.overrides")))

    def topic_defaults(self) -> dict[str, str]:
        """The effective broker defaults of the topic configs (each from its synonym)."""
        return {name: value for name, d in TOPIC_DEFS.items() if (value := self.default_of(d)) is not None}

    def log_defaults(self) -> LogConfig:
        """The log settings of a topic that sets none of its own."""
        known: dict[str, str | None] = {k: v for k, v in self.topic_defaults().items() if k in _LOG_NAMES}
        return LogConfig.from_kafka(known)

    def group_timings(self) -> dict[str, tuple[int | None, int | None]]:
        """Each group's own KIP-848 session timeout and heartbeat interval (for the coordinator)."""
        out: dict[str, tuple[int | None, int | None]] = {}
        for group in self.store.names(GROUPS):
            own = self.store.get(GROUPS, group)
            session, beat = own.get("consumer.session.timeout.ms"), own.get("consumer.heartbeat.interval.ms")
            if session is not None or beat is not None:
                out[group] = (None if session is None else int(session), None if beat is None else int(beat))
        return out

    def group_configs(self) -> dict[str, dict[str, str]]:
        """Each group's own configs, as set (for the coordinator)."""
        out: dict[str, dict[str, str]] = {}
        for group in self.store.names(GROUPS):
            own = dict(self.store.get(GROUPS, group))
            if own:
                out[group] = own
        return out

    def share_group_timings(self) -> dict[str, tuple[int | None, int | None]]:
        """Each share group's own session timeout and heartbeat interval (for the coordinator)."""
        out: dict[str, tuple[int | None, int | None]] = {}
        for group in self.store.names(GROUPS):
            own = self.store.get(GROUPS, group)
            session, beat = own.get("share.session.timeout.ms"), own.get("share.heartbeat.interval.ms")
            if session is not None or beat is not None:
                out[group] = (None if session is None else int(session), None if beat is None else int(beat))
        return out

    def _group_value(self, own: Mapping[str, str], name: str) -> object:
        """A group config's parsed value: the group's own, else its broker default."""
        definition = GROUP_DEFS[name]
        for text in (own.get(name), self.default_of(definition), definition.default):
            if text is not None:
                try:
                    return definition.parse(text)
                except InvalidValue:
                    continue
        return None

    def share_settings(self, group: str) -> ShareGroupSettings:
        """What the share partitions of ``group`` obey: its share configs over the broker's."""
        settings = self._share_settings.get(group)
        if settings is not None:
            return settings
        own = self.store.get(GROUPS, group)

        def number(name: str, fallback: int) -> int:
            value = self._group_value(own, name)
            return value if isinstance(value, int) else fallback

        reset_text = self._group_value(own, "share.auto.offset.reset")
        reset = parse_reset(reset_text) if isinstance(reset_text, str) else None
        dead_letter_topic = self._group_value(own, "errors.deadletterqueue.topic.name")
        dead_letter_topic = dead_letter_topic.strip() if isinstance(dead_letter_topic, str) else ""
        settings = ShareGroupSettings(
            Limits(lock_ms=number("share.record.lock.duration.ms", Limits.lock_ms),
                   delivery_limit=number("share.delivery.count.limit", Limits.delivery_limit),
                   max_in_flight=number("share.partition.max.record.locks", Limits.max_in_flight),
                   dead_letters=bool(dead_letter_topic),
                   renew=self._group_value(own, "share.renew.acknowledge.enable") is not False),
            read_committed=self._group_value(own, "share.isolation.level") == "read_committed",
            reset=reset or Reset(LATEST), dead_letter_topic=dead_letter_topic,
            copy_dead_letters=self._group_value(own, "errors.deadletterqueue.copy.record.enable") is True)
        self._share_settings[group] = settings
        return settings

    def sync(self) -> None:
        """Cluster mode: what another node changed in the shared document, in effect here too."""
        if self.store.refresh():
            self._share_settings.clear()
            self.on_defaults()
            self.on_groups()

    # ---- describing -----------------------------------------------------------------------------

    def describe(self, resource_type: int, name: str, keys: list[str] | None) -> list[Described]:
        """The configs of one resource (only ``keys`` when given); raises ``ConfigError``."""
        self.sync()
        if resource_type == ResourceType.TOPIC:
            topic = self.catalog.get(name)
            if topic is None:
                raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            described = [self._resource_config(d, topic.configs, ConfigSource.DYNAMIC_TOPIC_CONFIG)
                         for d in TOPIC_DEFS.values()]
        elif resource_type == ResourceType.GROUP:
            own = self.store.get(GROUPS, name)
            described = [self._resource_config(d, own, ConfigSource.GROUP_CONFIG) for d in GROUP_DEFS.values()
                         if d.name not in INTERNAL_GROUP_CONFIGS or d.name in own]
        elif resource_type == ResourceType.BROKER:
            if name == "":
                # The cluster-wide default: only what is set there, as Kafka shows it.
                described = [self._broker_config(k, only=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
                             for k in sorted(self.store.get(BROKERS, "")) if k in BROKER_DEFS]
            else:
                self._check_broker_name(name, describing=True)
                described = [self._broker_config(k) for k in sorted(BROKER_DEFS)]
        elif resource_type == ResourceType.BROKER_LOGGER:
            self._check_logger_node(name)
            described = [Described(ROOT_LOGGER, self.log_level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                                    ConfigType.UNKNOWN, "", False, False, ())]
        else:
            raise ConfigError(ErrorCode.INVALID_REQUEST, _unsupported(resource_type))
        return [d for d in described if keys is None or d.name in keys]

    def _check_logger_node(self, name: str) -> None:
        try:
            node = int(name)
        except ValueError:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
        if node != self.node_id:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unexpected node id. Expected {self.node_id}, but "
                                                         f"received {name}")

    def _alter_logger(self, name: str, changes: list[Change], validate_only: bool) -> None:
        """The broker's log level (Kafka's broker-loggers), as Kafka checks a change of it."""
        self._check_logger_node(name)
        level = self.log_level
        for change in changes:
            if change.op in (ConfigOp.APPEND, ConfigOp.SUBTRACT):
                raise ConfigError(ErrorCode.INVALID_REQUEST, f"{ConfigOp(change.op).name} operation is not allowed "
                                                             "for the BROKER_LOGGER resource")
            if change.name != ROOT_LOGGER:
                raise ConfigError(ErrorCode.INVALID_CONFIG, f"Logger {change.name} does not exist!")
            if change.op == ConfigOp.DELETE:
                raise ConfigError(ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
            if change.op != ConfigOp.SET:
                raise ConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if change.value not in LOG4J_LEVELS:
                raise ConfigError(ErrorCode.INVALID_CONFIG, f"Cannot set the log level of root to {change.value} as "
                                                            "it is not a supported log level. Valid log levels are "
                                                            + ", ".join(LOG4J_LEVELS))
            level = change.value
        if not validate_only and level != self.log_level:
            self.log_level = level
            self.on_log_level(_TO_PYTHON[level])

    def _resource_config(self, definition: ConfigDef, own: Mapping[str, str], source: ConfigSource) -> Described:
        layers = self._synonym_layers(definition)
        if definition.name in own:
            layers.insert(0, (definition.name, own[definition.name], source))
        value, found = ((layers[0][1], layers[0][2]) if layers
                        else (definition.default, ConfigSource.DEFAULT_CONFIG))
        return Described(definition.name, value, found, definition.type, definition.doc, False, False,
                         tuple(layers))

    def _broker_config(self, name: str, only: ConfigSource | None = None) -> Described:
        definition = BROKER_DEFS[name]
        layers = [layer for layer in self.broker_layers(name) if only is None or layer[2] == only]
        if definition.sensitive:
            layers = [(n, None, s) for n, _v, s in layers]
        value, source = (layers[0][1], layers[0][2]) if layers else (None, ConfigSource.DEFAULT_CONFIG)
        return Described(name, value, source, definition.type, definition.doc,
                         name not in DYNAMIC_BROKER_CONFIGS, definition.sensitive, tuple(layers))

    def _check_broker_name(self, name: str, describing: bool = False) -> None:
        if name == "" and not describing:
            return
        try:
            node = int(name)
        except ValueError:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
        if node != self.node_id:
            also = " or empty string" if describing else ""
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {self.node_id}{also}, but "
                                                         f"received {name}")

    # ---- listing --------------------------------------------------------------------------------

    def list_resources(self, types: list[int], live_nodes: list[int]) -> list[tuple[str, int]]:
        """ListConfigResources v1: the resources of ``types`` (every type served when empty)."""
        served = (ResourceType.GROUP, ResourceType.BROKER_LOGGER, ResourceType.BROKER, ResourceType.TOPIC,
                  ResourceType.CLIENT_METRICS)
        wanted = set(types) if types else set(served)
        out: list[tuple[str, int]] = []
        if ResourceType.GROUP in wanted:
            out += [(g, ResourceType.GROUP) for g in sorted(self.store.names(GROUPS))]
        if ResourceType.BROKER_LOGGER in wanted:
            out += [(str(n), ResourceType.BROKER_LOGGER) for n in sorted(live_nodes)]
        if ResourceType.BROKER in wanted:
            out += [(str(n), ResourceType.BROKER) for n in sorted(live_nodes)]
        if ResourceType.TOPIC in wanted:
            out += [(t, ResourceType.TOPIC) for t in sorted(self.catalog.topics)]
        return out

    # ---- changing -------------------------------------------------------------------------------

    def alter(self, resource_type: int, name: str, changes: list[Change], *, incremental: bool,
              validate_only: bool) -> None:
        """Applies ``changes`` to one resource: all of its configs (AlterConfigs: what is not named
        goes back to its default) or only those named (IncrementalAlterConfigs). Raises
        ``ConfigError``; returns once the change is durable and handed on."""
        if resource_type == ResourceType.BROKER_LOGGER and incremental:
            self._alter_logger(name, changes, validate_only)
            return
        if resource_type not in (ResourceType.TOPIC, ResourceType.BROKER, ResourceType.GROUP):
            raise ConfigError(ErrorCode.INVALID_REQUEST, _unsupported(resource_type))
        self.sync()
        if len({c.name for c in changes}) != len(changes):
            raise ConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        if resource_type == ResourceType.TOPIC:
            # Kafka checks the configs before it looks for the topic.
            topic = self.catalog.get(name)
            current, defs, bad = dict(topic.configs) if topic else {}, TOPIC_DEFS, ErrorCode.INVALID_CONFIG
        elif resource_type == ResourceType.GROUP:
            if not name:
                raise ConfigError(ErrorCode.INVALID_REQUEST, "Group id must not be empty.")
            current, defs, bad = self.store.get(GROUPS, name), GROUP_DEFS, ErrorCode.INVALID_CONFIG
        else:
            self._check_broker_name(name)
            # Kafka answers a broker config that fails validation with INVALID_REQUEST (KAFKA-13609).
            current, defs, bad = self.store.get(BROKERS, name), BROKER_DEFS, ErrorCode.INVALID_REQUEST
        updated = self._apply_ops(resource_type, current, changes, defs, incremental)
        self._validate(resource_type, name, updated, defs, bad)
        if resource_type == ResourceType.TOPIC and self.catalog.get(name) is None:
            raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if validate_only:
            return
        if resource_type == ResourceType.TOPIC:
            self.on_topic(self.catalog.set_configs(name, updated))
        elif resource_type == ResourceType.GROUP:
            self.store.put(GROUPS, name, updated)
            self._share_settings.pop(name, None)
            self.on_groups()
        else:
            self.store.put(BROKERS, name, updated)
            self._share_settings.clear()
            self.on_defaults()

    def _apply_ops(self, resource_type: int, current: dict[str, str], changes: list[Change],
                   defs: Mapping[str, ConfigDef], incremental: bool) -> dict[str, str]:
        updated = dict(current) if incremental else {}
        for change in changes:
            self._check_name(resource_type, change.name, defs)
            op = change.op if incremental else ConfigOp.SET
            if op not in tuple(ConfigOp):
                raise ConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, None)  # as Kafka answers it
            if op == ConfigOp.DELETE:
                updated.pop(change.name, None)
                continue
            if change.value is None:
                raise ConfigError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {change.name}")
            if op == ConfigOp.SET:
                updated[change.name] = change.value
                continue
            definition = defs.get(change.name)
            if definition is None or definition.type is not ConfigType.LIST:
                raise ConfigError(ErrorCode.INVALID_CONFIG, f"Can't {ConfigOp(op).name} to key {change.name} "
                                                            "because its type is not LIST.")
            now = updated.get(change.name)
            if now is None:
                now = (self.default_of(definition) if resource_type != ResourceType.BROKER
                       else next(iter(self.broker_layers(change.name)), ("", "", 0))[1]) or ""
            items = [i.strip() for i in now.split(",") if i.strip()]
            given = [i.strip() for i in change.value.split(",") if i.strip()]
            if op == ConfigOp.APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            updated[change.name] = ",".join(items)
        return updated

    @staticmethod
    def _check_name(resource_type: int, name: str, defs: Mapping[str, ConfigDef]) -> None:
        if resource_type == ResourceType.TOPIC and name not in defs:
            raise ConfigError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if resource_type == ResourceType.GROUP and name not in defs:
            raise ConfigError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        if resource_type == ResourceType.BROKER and name in defs and name not in DYNAMIC_BROKER_CONFIGS:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: [{name}]")

    def _validate(self, resource_type: int, name: str, updated: Mapping[str, str], defs: Mapping[str, ConfigDef],
                  bad: int) -> None:
        parsed: dict[str, object] = {}
        for key, text in updated.items():
            definition = defs.get(key)
            if definition is None:
                continue  # a broker property kcoord does not know: kept, as Kafka keeps it
            try:
                parsed[key] = definition.parse(text)
            except InvalidValue as exc:
                raise ConfigError(bad, f"Invalid value {text} for configuration {key}: {exc}") from None
        if resource_type == ResourceType.TOPIC:
            try:
                topic_log_config(self.log_defaults(), dict(updated))
            except (ValueError, TypeError) as exc:
                raise ConfigError(bad, str(exc)) from None
        elif resource_type == ResourceType.BROKER:
            # The topic defaults these would make must make a valid log config (cleanup.policy
            # empty, say, passes the list check but no log could follow it).
            saved = self.store.docs[BROKERS]
            self.store.docs[BROKERS] = {**saved, name: dict(updated)}
            try:
                self.log_defaults()
                # Checked as Kafka parses it, with its messages (not "Invalid value ...").
                parse_overrides(updated.get("max.connections.per.ip.overrides", ""))
            except (ValueError, TypeError) as exc:
                raise ConfigError(bad, str(exc)) from None
            finally:
                self.store.docs[BROKERS] = saved
        elif resource_type == ResourceType.GROUP:
            effective: dict[str, object] = {}
            for key, definition in GROUP_DEFS.items():
                if key in parsed:
                    effective[key] = parsed[key]
                elif (default := self.default_of(definition)) is not None:
                    try:
                        effective[key] = definition.parse(default)
                    except InvalidValue:
                        continue
            try:
                check_group_configs(effective, self.group_ranges)
            except InvalidValue as exc:
                raise ConfigError(bad, str(exc)) from None


def _unsupported(resource_type: int) -> str:
    if resource_type == ResourceType.CLIENT_METRICS:
        return "client-metrics resources are not configurable on kcoord"
    return f"Unknown resource type {resource_type}"
