"""Broker configuration: Kafka's property names and defaults, one table, four sources.

Precedence: ``--override name=value`` > ``KCOORD_<NAME>`` env vars > ``--config FILE`` (TOML or
Java ``.properties``) > defaults. An unknown or ill-typed property is a startup error naming it.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from broker.network.connection_limits import ConnectionLimits, LimitsError
from broker.security.listeners import (
    DEFAULT_PROTOCOL_MAP,
    ListenerError,
    ListenerSpec,
    parse_advertised,
    parse_listeners,
)
from broker.security.properties import LISTENER_PREFIX, check_security
from storage.properties import PropertiesError, parse_properties

# What a property holds: its declared type.
ConfigValue = bool | int | float | str


class ConfigError(ValueError):
    """A property that is unknown, ill-typed or out of range."""


@dataclass(frozen=True)
class Property:
    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    # Passwords and keys: DescribeConfigs answers them with no value and is_sensitive, as Kafka does.
    secret: bool = False


PROPERTIES: tuple[Property, ...] = (
    Property("node.id", int, 1, "Id of this broker in Metadata and FindCoordinator answers.", minimum=0),
    Property("cluster.id", str, "", "Cluster id; empty = generated once and kept in meta.properties."),
    Property("process.nodes", int, 1, "Node processes `kcoord serve` runs on this host as one cluster on "
             "log.dirs, to use more cores (docs/cluster.md): node i (from 0) gets node.id + i and ports above the "
             "configured ones; without etcd.endpoints it runs a private etcd too. 1 = this process is the node.",
             minimum=1),
    Property("listeners", str, "PLAINTEXT://127.0.0.1:9092", "Where to listen: comma-separated NAME://host:port; "
             "the name maps to PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL through "
             "listener.security.protocol.map."),
    Property("advertised.listeners", str, "", "Address given to clients, per listener name; empty = same as "
             "listeners."),
    Property("log.dirs", str, ".kcoord-data", "Data directory (the __consumer_offsets-N and topic logs)."),
    Property("etcd.endpoints", str, "", "Cluster mode: etcd client URLs, comma-separated (https://host:2379, "
             "or http:// on loopback or with etcd.allow.plaintext); empty = a single node, no etcd."),
    Property("etcd.prefix", str, "", "Key space of the cluster in etcd; empty = /kcoord/<cluster.id>."),
    Property("broker.session.timeout.ms", int, 9000, "Cluster mode: TTL of this node's etcd lease; a node that "
             "stops renewing it loses its partitions to the others this long after.", minimum=3000),
    Property("etcd.username", str, "", "Cluster mode: the etcd user this node authenticates as (etcd's auth); "
             "empty = none."),
    Property("etcd.password", str, "", "Password of etcd.username.", secret=True),
    Property("etcd.allow.plaintext", bool, False, "Cluster mode: allow http:// etcd endpoints on other hosts "
             "(the cluster's secrets then cross the network unencrypted); otherwise they stop startup. Loopback "
             "is always allowed."),
    Property("etcd.ssl.keystore.location", str, "", "Keystore file with this node's etcd client certificate and "
             "private key, of etcd.ssl.keystore.type (https:// endpoints; for etcd's --client-cert-auth)."),
    Property("etcd.ssl.keystore.type", str, "JKS", "Format of etcd.ssl.keystore.location, as ssl.keystore.type.",
             choices=("JKS", "PKCS12", "PEM")),
    Property("etcd.ssl.keystore.password", str, "", "Password of the JKS or PKCS12 etcd keystore.", secret=True),
    Property("etcd.ssl.keystore.certificate.chain", str, "", "This node's PEM etcd client certificate chain, "
             "inline (instead of etcd.ssl.keystore.location)."),
    Property("etcd.ssl.keystore.key", str, "", "This node's PEM etcd client private key, inline (instead of "
             "etcd.ssl.keystore.location).", secret=True),
    Property("etcd.ssl.key.password", str, "", "Password of the etcd client private key, as ssl.key.password.",
             secret=True),
    Property("etcd.ssl.truststore.location", str, "", "Truststore file of the CA certificates etcd's server "
             "certificate must chain to, of etcd.ssl.truststore.type; empty = the system's CA certificates."),
    Property("etcd.ssl.truststore.type", str, "JKS", "Format of etcd.ssl.truststore.location, as "
             "ssl.truststore.type.", choices=("JKS", "PKCS12", "PEM")),
    Property("etcd.ssl.truststore.password", str, "", "Password of the JKS or PKCS12 etcd truststore.",
             secret=True),
    Property("etcd.ssl.truststore.certificates", str, "", "The CA certificates for etcd in PEM, inline (instead "
             "of etcd.ssl.truststore.location)."),
    Property("etcd.ssl.endpoint.identification.algorithm", str, "https", "https = etcd's certificate must name "
             "the host of the endpoint (as a TLS client checks it); empty = any host name is accepted.",
             choices=("https", "")),
    Property("socket.request.max.bytes", int, 104857600, "Largest request frame; bigger closes the connection.",
             minimum=1),
    Property("socket.send.worker.min.round", int, 16, "A readiness round serving at least this many client "
             "connections hands their answers to the node's send worker, a process that writes them on another core "
             "(docs/architecture.md); 0 = the event loop writes every answer itself.", minimum=0),
    Property("max.connections", int, 2147483647, "Most client connections held at once; at the limit new "
             "ones wait in the listen backlog until one closes. Never more than the open-files limit less a reserve "
             "kept for the logs (docs/limits.md).", minimum=0),
    Property("max.connections.per.ip", int, 2147483647, "Most client connections from one address; more are "
             "closed as soon as they are accepted.", minimum=0),
    Property("max.connections.per.ip.overrides", str, "", "Per-address exceptions to max.connections.per.ip: "
             "comma-separated host:count (a host name is resolved at startup)."),
    Property("max.incremental.fetch.session.cache.slots", int, 1000, "Most incremental fetch sessions (KIP-227) "
             "the node keeps; a consumer that finds no slot goes on with full fetches.", minimum=0),
    Property("offsets.topic.num.partitions", int, 50, "Partitions (shards) of __consumer_offsets; never change.",
             minimum=1),
    Property("offsets.topic.segment.bytes", int, 104857600, "Segment size of __consumer_offsets partitions.",
             minimum=1024),
    Property("offsets.retention.minutes", int, 10080, "How long committed offsets are kept (KIP-211 rules).",
             minimum=1),
    Property("offsets.retention.check.interval.ms", int, 600000, "How often expired offsets are swept.",
             minimum=1),
    Property("offset.metadata.max.bytes", int, 4096, "Longest commit metadata string.", minimum=0),
    Property("offsets.commit.timeout.ms", int, 5000, "Longest wait for a coordinator write to be durable.",
             minimum=1),
    Property("group.min.session.timeout.ms", int, 6000, "Smallest session timeout a member may ask for.",
             minimum=0),
    Property("group.max.session.timeout.ms", int, 1800000, "Largest session timeout a member may ask for.",
             minimum=0),
    Property("group.initial.rebalance.delay.ms", int, 3000, "Wait for more members when an empty group forms.",
             minimum=0),
    Property("transaction.state.log.num.partitions", int, 50, "Partitions of __transaction_state; never change.",
             minimum=1),
    Property("transaction.state.log.segment.bytes", int, 104857600, "Segment size of __transaction_state "
             "partitions.", minimum=1024),
    Property("transaction.max.timeout.ms", int, 900000, "Largest transaction timeout a producer may ask for.",
             minimum=1),
    Property("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10000, "Accepted as Kafka's; "
             "kcoord needs no scan: each transaction is aborted at its own timeout, timed on the steady clock "
             "(Kafka scans this often and compares wall-clock times).", minimum=1),
    Property("transaction.version", int, 2, "The finalized transaction.version feature level, as a Kafka cluster "
             "is formatted with --feature transaction.version=N: 2 has producers bump their epoch with every "
             "transaction (KIP-890 part 2); 1 and 2 write __transaction_state values at their flexible version; "
             "0 is the original protocol. Every level is served to the clients that speak it.",
             minimum=0, maximum=2),
    Property("transaction.two.phase.commit.enable", bool, False, "Allow producers to take part in two-phase "
             "commit (KIP-939: InitProducerId v6 with Enable2Pc, their transactions never timed out); a producer "
             "asking for it otherwise is refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka."),
    Property("transaction.partition.verification.enable", bool, True, "Take the first transactional batch of "
             "a transaction on a partition only if the transaction coordinator has the partition in that "
             "transaction (KIP-890 part 1); refused, it answers INVALID_TXN_STATE."),
    Property("transactional.id.expiration.ms", int, 604800000, "A transactional id with no transaction open "
             "and no change for this long is forgotten (its producer id and epoch with it).", minimum=1),
    Property("transactions.remove.expired.transaction.cleanup.interval.ms", int, 3600000, "How often the "
             "transaction coordinator looks for transactional ids to forget.", minimum=1),
    Property("group.max.size", int, 2147483647, "Most members a group may have.", minimum=1),
    Property("group.share.session.timeout.ms", int, 45000, "Session timeout of share-group (KIP-932) members.",
             minimum=1),
    Property("group.share.min.session.timeout.ms", int, 45000, "Smallest share.session.timeout.ms a share group "
             "may set, and smallest group.share.session.timeout.ms.", minimum=1),
    Property("group.share.max.session.timeout.ms", int, 60000, "Largest share.session.timeout.ms a share group "
             "may set, and largest group.share.session.timeout.ms.", minimum=1),
    Property("group.share.heartbeat.interval.ms", int, 5000, "Heartbeat interval the broker gives share-group "
             "members.", minimum=1),
    Property("group.share.min.heartbeat.interval.ms", int, 5000, "Smallest share.heartbeat.interval.ms a share "
             "group may set, and smallest group.share.heartbeat.interval.ms.", minimum=1),
    Property("group.share.max.heartbeat.interval.ms", int, 15000, "Largest share.heartbeat.interval.ms a share "
             "group may set, and largest group.share.heartbeat.interval.ms.", minimum=1),
    Property("group.share.max.size", int, 200, "Most members a share group may have.", minimum=1, maximum=1000),
    Property("group.share.record.lock.duration.ms", int, 30000, "How long a share-group member holds the records "
             "it acquired before they are released for another delivery.", minimum=1000, maximum=3600000),
    Property("group.share.min.record.lock.duration.ms", int, 15000, "Smallest record lock duration: of "
             "group.share.record.lock.duration.ms and of a share group's share.record.lock.duration.ms.",
             minimum=1000, maximum=30000),
    Property("group.share.max.record.lock.duration.ms", int, 60000, "Largest record lock duration: of "
             "group.share.record.lock.duration.ms and of a share group's share.record.lock.duration.ms.",
             minimum=30000, maximum=3600000),
    Property("group.share.delivery.count.limit", int, 5, "Deliveries of a record to a share group after which it "
             "is archived instead of released again.", minimum=2, maximum=10),
    Property("group.share.min.delivery.count.limit", int, 2, "Smallest delivery count limit: of "
             "group.share.delivery.count.limit and of a share group's share.delivery.count.limit.",
             minimum=2, maximum=5),
    Property("group.share.max.delivery.count.limit", int, 10, "Largest delivery count limit: of "
             "group.share.delivery.count.limit and of a share group's share.delivery.count.limit.",
             minimum=5, maximum=25),
    Property("group.share.partition.max.record.locks", int, 2000, "Most records of a share partition in flight "
             "(acquired or released for redelivery) at once.", minimum=100, maximum=10000),
    Property("group.share.min.partition.max.record.locks", int, 100, "Smallest in-flight cap: of "
             "group.share.partition.max.record.locks and of a share group's share.partition.max.record.locks.",
             minimum=100, maximum=2000),
    Property("group.share.max.partition.max.record.locks", int, 4000, "Largest in-flight cap: of "
             "group.share.partition.max.record.locks and of a share group's share.partition.max.record.locks.",
             minimum=2000, maximum=10000),
    Property("group.share.assignment.interval.ms", int, 1000, "Least time between two target assignments "
             "of a share group (KIP-1263): a change within it waits for a heartbeat after it.", minimum=0),
    Property("group.share.min.assignment.interval.ms", int, 0, "Smallest share.assignment.interval.ms a share "
             "group may set.", minimum=0),
    Property("group.share.max.assignment.interval.ms", int, 15000, "Largest share.assignment.interval.ms a share "
             "group may set.", minimum=0),
    Property("group.share.max.share.sessions", int, 2000, "Most share sessions open on this broker at once; "
             "a share fetch that would open one more is answered SHARE_SESSION_LIMIT_REACHED.", minimum=1),
    Property("share.coordinator.state.topic.num.partitions", int, 50, "Partitions of __share_group_state, where "
             "share partitions' delivery state is kept.", minimum=1),
    Property("share.coordinator.snapshot.update.records.per.snapshot", int, 500, "ShareUpdate records written "
             "for a share partition between two ShareSnapshot records of it in __share_group_state (0: every "
             "write is a snapshot).", minimum=0, maximum=500),
    Property("share.coordinator.cold.partition.snapshot.interval.ms", int, 300000, "How often the share "
             "coordinator writes a ShareSnapshot of each share partition whose last record is a ShareUpdate.",
             minimum=1),
    Property("group.consumer.session.timeout.ms", int, 45000, "Session timeout of consumer-protocol (KIP-848) "
             "members: the broker decides it, not the client.", minimum=1),
    Property("group.consumer.min.session.timeout.ms", int, 45000, "Smallest group.consumer.session.timeout.ms.",
             minimum=1),
    Property("group.consumer.max.session.timeout.ms", int, 60000, "Largest group.consumer.session.timeout.ms.",
             minimum=1),
    Property("group.consumer.heartbeat.interval.ms", int, 5000, "Heartbeat interval the broker gives "
             "consumer-protocol members.", minimum=1),
    Property("group.consumer.min.heartbeat.interval.ms", int, 5000, "Smallest "
             "group.consumer.heartbeat.interval.ms.", minimum=1),
    Property("group.consumer.max.heartbeat.interval.ms", int, 15000, "Largest "
             "group.consumer.heartbeat.interval.ms.", minimum=1),
    Property("group.consumer.assignment.interval.ms", int, 1000, "Least time between two target assignments "
             "of a consumer-protocol group (KIP-1263): a change within it waits for a heartbeat after it.",
             minimum=0),
    Property("group.consumer.min.assignment.interval.ms", int, 0, "Smallest consumer.assignment.interval.ms a "
             "group may set.", minimum=0),
    Property("group.consumer.max.assignment.interval.ms", int, 15000, "Largest consumer.assignment.interval.ms "
             "a group may set.", minimum=0),
    Property("group.consumer.max.size", int, 2147483647, "Most members a consumer-protocol group may have.",
             minimum=1),
    Property("group.streams.session.timeout.ms", int, 45000, "Session timeout of streams-group (KIP-1071) "
             "members: the broker decides it, not the client.", minimum=1),
    Property("group.streams.heartbeat.interval.ms", int, 5000, "Heartbeat interval the broker gives "
             "streams-group members.", minimum=1),
    Property("group.streams.num.standby.replicas", int, 0, "Standby copies of every stateful task the "
             "streams assignor places on other processes.", minimum=0),
    Property("group.streams.initial.rebalance.delay.ms", int, 3000, "How long a new streams group waits for "
             "more members before its first task assignment.", minimum=0),
    Property("group.streams.max.size", int, 2147483647, "Most members a streams group may have.", minimum=1),
    Property("group.streams.rack.aware.assignment.tags", str, "", "Client tag keys (comma-separated) over which "
             "the streams assignor spreads each task's standby copies; a group's own "
             "streams.rack.aware.assignment.tags overrides it. Members without these tags are told "
             "MISSING_CLIENT_TAGS."),
    Property("group.streams.topology.description.plugin.class", str, "", "Where streams groups' topology "
             "descriptions (KIP-1331) are kept: empty = nowhere (StreamsGroupTopologyDescriptionUpdate is "
             "answered UNSUPPORTED_VERSION, as by Kafka without a plugin); Kafka's reference plugin "
             "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin = in this broker's memory.",
             choices=("", "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin")),
    Property("group.consumer.assignors", str, "uniform,range", "Server-side assignors of consumer-protocol "
             "groups, by name; the first is the default."),
    Property("group.consumer.migration.policy", str, "bidirectional", "Online migration between classic and "
             "consumer-protocol groups: bidirectional, upgrade (classic to consumer only), downgrade (consumer "
             "to classic only) or disabled."),
    Property("group.events.enable", bool, True, "Keep the rebalance journal (__kcoord_group_events): why and "
             "how long every group rebalanced."),
    Property("group.events.retention.ms", int, 604800000, "Time retention of __kcoord_group_events.",
             minimum=1),
    Property("auto.create.topics.enable", bool, True, "Create unknown topics on Metadata/Produce requests."),
    Property("unstable.api.versions.enable", bool, False, "Advertise the API versions Kafka 4.4 marks unstable, "
             "as Kafka does with this property: InitProducerId v6 (two-phase commit participants, KIP-939)."),
    Property("num.partitions", int, 1, "Partitions of an auto-created topic.", minimum=1),
    Property("log.flush.policy", str, "sync", "sync: fdatasync before acknowledging; interval: flush every "
             "log.flush.interval.ms and acknowledge after the write.", choices=("sync", "interval")),
    Property("log.flush.interval.ms", int, 1000, "Flush period when log.flush.policy=interval.", minimum=1),
    Property("log.segment.bytes", int, 1073741824, "Segment size of ordinary topics.", minimum=1024),
    Property("log.retention.ms", int, 604800000, "Time retention of ordinary topics (-1 = forever)."),
    Property("log.retention.bytes", int, -1, "Size retention per partition of ordinary topics (-1 = none)."),
    Property("log.retention.check.interval.ms", int, 300000, "How often topic retention (time and size) is "
             "applied.", minimum=1),
    Property("log.cleaner.enable", bool, True, "Compact __consumer_offsets in the background."),
    Property("log.cleaner.backoff.ms", int, 15000, "Pause between compaction checks.", minimum=1),
    Property("log.cleaner.delete.retention.ms", int, 86400000, "How long tombstones survive compaction.",
             minimum=0),
    Property("log.cleaner.min.compaction.lag.ms", int, 0, "Records younger than this are not compacted.",
             minimum=0),
    Property("log.cleaner.min.cleanable.ratio", float, 0.5, "Dirty ratio that triggers compaction."),
    Property("message.max.bytes", int, 1048588, "Largest record batch accepted by Produce.", minimum=1),
    Property("console.listener", str, "http://:9465", "The console, a web view of the cluster and its "
             "groups (docs/console.md); without a host it listens on the host of listeners (loopback by "
             "default); empty disables it; https://host:port serves it over TLS with the ssl.* properties, "
             "and with ssl.client.auth a client certificate's principal is the console's user."),
    Property("console.actions.enable", bool, False, "Let the console reset a group's offsets, delete its "
             "offsets and delete an empty group, for a user signed in with its SCRAM credentials and allowed "
             "the equivalent Kafka API by the ACLs (docs/console.md); off, the console is read-only."),
    Property("metrics.listener", str, "http://:9464", "Prometheus endpoint (path /metrics); without a host "
             "it listens on the host of listeners (loopback by default); empty disables it."),
    Property("metrics.lag.groups", str, ".*", "Groups whose lag is exported (kafka_consumergroup_*): "
             "comma-separated regular expressions, each matched against the whole group id."),
    Property("metrics.lag.max.partitions", int, 10000, "Most group partitions exported in the lag series per "
             "scrape (whole groups, in group order; the rest counted in kcoord_lag_partitions_omitted); 0 "
             "turns lag metrics off.", minimum=0),
    Property("listener.security.protocol.map", str, DEFAULT_PROTOCOL_MAP, "Listener name -> security protocol, "
             "NAME:PROTOCOL comma-separated."),
    Property("ssl.keystore.location", str, "", "Keystore file with this broker's private key and certificate "
             "chain, of ssl.keystore.type."),
    Property("ssl.keystore.type", str, "JKS", "Format of ssl.keystore.location: JKS (as in Java, a PKCS12 file "
             "is read too), PKCS12 or PEM (chain and key in one file). A PEM file is read whatever the type.",
             choices=("JKS", "PKCS12", "PEM")),
    Property("ssl.keystore.password", str, "", "Password of the JKS or PKCS12 keystore.", secret=True),
    Property("ssl.keystore.certificate.chain", str, "", "The broker's PEM certificate chain, inline (instead of "
             "ssl.keystore.location)."),
    Property("ssl.keystore.key", str, "", "The broker's PEM private key, inline (instead of "
             "ssl.keystore.location).", secret=True),
    Property("ssl.key.password", str, "", "Password of the private key (of an encrypted PEM key; in a JKS "
             "keystore, the keystore password when empty).", secret=True),
    Property("ssl.truststore.location", str, "", "Truststore file of the CA certificates that client "
             "certificates are checked against, of ssl.truststore.type."),
    Property("ssl.truststore.type", str, "JKS", "Format of ssl.truststore.location: JKS (or PKCS12, as Java "
             "reads it), PKCS12 or PEM.", choices=("JKS", "PKCS12", "PEM")),
    Property("ssl.truststore.password", str, "", "Password of the JKS or PKCS12 truststore (a JKS store is "
             "read unchecked without one, as Java reads it).", secret=True),
    Property("ssl.truststore.certificates", str, "", "The trusted CA certificates in PEM, inline (instead of "
             "ssl.truststore.location)."),
    Property("ssl.principal.mapping.rules", str, "DEFAULT", "How a client certificate's subject (RFC 2253) "
             "becomes the principal's name: comma-separated RULE:pattern/replacement/[LU] and DEFAULT (the "
             "subject as it is), first match wins, as Kafka reads them; a subject no rule matches is refused."),
    Property("ssl.client.auth", str, "none", "Client certificates on SSL listeners (and an https "
             "console.listener): none, requested or required (mTLS; the principal is User:<certificate subject>).",
             choices=("none", "requested", "required")),
    Property("ssl.handshake.timeout.ms", int, 10000, "A TLS handshake not finished in this time closes the "
             "connection.", minimum=1),
    Property("sasl.enabled.mechanisms", str, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms offered on "
             "SASL listeners: any of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI (one listener's own: "
             "listener.name.<listener>.sasl.enabled.mechanisms; a mechanism's JAAS config: "
             "listener.name.<listener>.<mechanism>.sasl.jaas.config, as Kafka reads them)."),
    Property("sasl.kerberos.service.name", str, "", "GSSAPI: the Kerberos service name of the broker's principal "
             "(kafka for kafka/host@REALM), as Kafka reads it."),
    Property("sasl.kerberos.principal.to.local.rules", str, "DEFAULT", "GSSAPI: how a client's Kerberos principal "
             "becomes the principal's short name (User:<name>): DEFAULT and RULE:[n:format](match)s/from/to/[LU], "
             "first match wins, as Kafka reads them."),
    Property("sasl.bootstrap.users", str, "", "Users created at startup when absent, name:password "
             "comma-separated, with SCRAM-SHA-256 and SCRAM-SHA-512 credentials (PLAIN checks the same "
             "credentials).", secret=True),
    Property("sasl.server.max.receive.size", int, 524288, "Largest request before authentication; bigger "
             "closes the connection.", minimum=1),
    Property("connections.max.reauth.ms", int, 0, "Lifetime of a SASL session (KIP-368); the client must "
             "re-authenticate within it. 0 = sessions never expire.", minimum=0),
    Property("connection.failed.authentication.delay.ms", int, 100, "Delay before the answer to a failed "
             "authentication is sent and the connection closed.", minimum=0),
    # OAUTHBEARER with signed tokens (OIDC, KIP-768): a listener whose
    # listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class is Kafka's
    # OAuthBearerValidatorCallbackHandler. Each may be given per listener
    # (listener.name.<listener>.[oauthbearer.]<name>), as Kafka reads them.
    Property("errors.deadletterqueue.auto.create.topics.enable", bool, False, "Share groups: a dead-letter queue "
             "topic (the group's errors.deadletterqueue.topic.name) that does not exist is created when first "
             "written, with errors.deadletterqueue.group.enable=true (KIP-1191)."),
    Property("errors.deadletterqueue.topic.name.prefix", str, "dlq.", "Share groups: what every dead-letter queue "
             "topic's name must start with (empty: anything but __)."),
    Property("sasl.oauthbearer.jwks.endpoint.url", str, "", "OAUTHBEARER (OIDC): the identity provider's JSON Web "
             "Key Set (http, https or file); fetched at startup (a broker that cannot fetch it does not start), "
             "then refreshed."),
    Property("sasl.oauthbearer.jwks.endpoint.refresh.ms", int, 3600000, "OAUTHBEARER (OIDC): how often the key set "
             "is fetched again (and at once when a token names a key it lacks, at most once a minute per key).",
             minimum=1),
    Property("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", int, 100, "OAUTHBEARER (OIDC): the first wait "
             "before a failed key-set fetch is tried again; each wait doubles.", minimum=0),
    Property("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", int, 10000, "OAUTHBEARER (OIDC): how long a "
             "refresh goes on trying in all before the keys in hand are kept.", minimum=0),
    Property("sasl.oauthbearer.expected.audience", str, "", "OAUTHBEARER (OIDC): the audiences a token's aud claim "
             "must name one of, comma-separated; required unless sasl.oauthbearer.allow.unverified.audience."),
    Property("sasl.oauthbearer.expected.issuer", str, "", "OAUTHBEARER (OIDC): the iss claim a token must carry; "
             "required unless sasl.oauthbearer.allow.unverified.issuer."),
    Property("sasl.oauthbearer.allow.unverified.audience", bool, False, "OAUTHBEARER (OIDC): accept a token "
             "whatever its aud claim (logged as a warning at startup)."),
    Property("sasl.oauthbearer.allow.unverified.issuer", bool, False, "OAUTHBEARER (OIDC): accept a token whatever "
             "its iss claim (logged as a warning at startup)."),
    Property("sasl.oauthbearer.scope.claim.name", str, "scope", "OAUTHBEARER (OIDC): the claim holding a token's "
             "scopes."),
    Property("sasl.oauthbearer.sub.claim.name", str, "sub", "OAUTHBEARER (OIDC): the claim holding the principal "
             "(User:<value>)."),
    Property("sasl.oauthbearer.clock.skew.seconds", int, 30, "OAUTHBEARER (OIDC): how far a token's exp and nbf "
             "may be off the broker's clock.", minimum=0),
    Property("delegation.token.secret.key", str, "", "Secret the HMACs of delegation tokens (KIP-48) are made "
             "with; the same on every node. Empty = delegation tokens are disabled "
             "(DELEGATION_TOKEN_AUTH_DISABLED).", secret=True),
    Property("delegation.token.max.lifetime.ms", int, 604800000, "Longest a delegation token can live, "
             "renewals included.", minimum=1),
    Property("delegation.token.expiry.time.ms", int, 86400000, "How long a delegation token lives from its "
             "creation or last renewal unless renewed.", minimum=1),
    Property("delegation.token.expiry.check.interval.ms", int, 3600000, "How often expired delegation tokens "
             "are removed.", minimum=1),
    Property("authorizer.class.name", str, "", "Empty = no authorization; "
             "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or kafka.security.authorizer.AclAuthorizer) "
             "= ACLs are enforced."),
    Property("super.users", str, "", "Principals allowed everything, semicolon-separated: User:admin;User:ops."),
    Property("allow.everyone.if.no.acl.found", bool, False, "With the authorizer on, allow an operation on a "
             "resource that no ACL names."),
    Property("quota.window.num", int, 11, "Client quotas: number of sample windows a quota's rate is measured "
             "over.", minimum=1),
    Property("quota.window.size.seconds", int, 1, "Client quotas: length of one sample window.", minimum=1),
    Property("telemetry.max.bytes", int, 1048576, "Largest metrics payload a client may push (KIP-714 "
             "PushTelemetry).", minimum=1),
    Property("log.level", str, "INFO", "Log level of the broker's structured log.",
             choices=("DEBUG", "INFO", "WARNING", "ERROR")),
)

_BY_NAME = {p.name: p for p in PROPERTIES}
SECRET_PROPERTIES = frozenset(p.name for p in PROPERTIES if p.secret)
_BY_ENV = {"KCOORD_" + p.name.upper().replace(".", "_"): p for p in PROPERTIES}


def _coerce(prop: Property, raw: Any, source: str) -> Any:
    try:
        if prop.type is bool:
            if isinstance(raw, bool):
                value: Any = raw
            elif str(raw).strip().lower() in ("true", "1", "yes"):
                value = True
            elif str(raw).strip().lower() in ("false", "0", "no"):
                value = False
            else:
                raise ValueError(raw)
        elif prop.type is int:
            if isinstance(raw, bool):
                raise ValueError(raw)
            value = int(str(raw).strip())
        elif prop.type is float:
            value = float(str(raw).strip())
        else:
            value = str(raw).strip()
    except ValueError:
        raise ConfigError(f"{prop.name}: {raw!r} is not a valid {prop.type.__name__} (from {source})") from None
    if prop.choices and value not in prop.choices:
        raise ConfigError(f"{prop.name}: {value!r} is not one of {', '.join(prop.choices)} (from {source})")
    if prop.minimum is not None and value < prop.minimum:
        raise ConfigError(f"{prop.name}: {value} is below the minimum {prop.minimum} (from {source})")
    if prop.maximum is not None and value > prop.maximum:
        raise ConfigError(f"{prop.name}: {value} is above the maximum {prop.maximum} (from {source})")
    return value


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text()
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        return dict(_flatten(data))
    try:
        return dict(parse_properties(text))
    except PropertiesError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: expected name=value") from None


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Any:
    """TOML may write ``[group] initial.rebalance.delay.ms = 0`` or quoted dotted keys."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, name + ".")
        else:
            yield name, value


# Each share-group setting and the broker's bounds of it: the setting must lie within them, as
# Kafka's ShareGroupConfig and GroupCoordinatorConfig require at startup.
SHARE_BOUNDED = ("record.lock.duration.ms", "delivery.count.limit", "partition.max.record.locks",
                 "session.timeout.ms", "heartbeat.interval.ms")


def _check_share_ranges(values: Mapping[str, Any]) -> None:
    for name in SHARE_BOUNDED:
        value, low, high = (values[f"group.share.{name}"], values[f"group.share.min.{name}"],
                            values[f"group.share.max.{name}"])
        if value < low:
            raise ConfigError(f"group.share.{name} must be greater than or equal to group.share.min.{name}")
        if high < value:
            raise ConfigError(f"group.share.max.{name} must be greater than or equal to group.share.{name}")
    if values["group.share.heartbeat.interval.ms"] >= values["group.share.session.timeout.ms"]:
        raise ConfigError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")


@dataclass(frozen=True)
class Listener:
    host: str
    port: int


class BrokerConfig:
    """Resolved properties; attribute access by the property name with dots as underscores."""

    def __init__(self, values: dict[str, Any], given: frozenset[str] = frozenset()) -> None:
        self.values = values
        # The properties set explicitly (file, environment, overrides): DescribeConfigs shows them
        # as STATIC_BROKER_CONFIG, the others as DEFAULT_CONFIG.
        self.given = given
        try:
            self.listeners: list[ListenerSpec] = parse_listeners(values["listeners"],
                                                                 values["listener.security.protocol.map"])
            self.advertised_by_listener = parse_advertised(values["advertised.listeners"], self.listeners)
        except ListenerError as exc:
            raise ConfigError(str(exc)) from None
        first = self.listeners[0]
        self.listener = Listener(first.host, first.port)
        self.advertised = Listener(*self.advertised_by_listener[first.name])
        try:
            check_security(values, self.listeners)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        try:
            self.connection_limits = ConnectionLimits.from_values(
                values["max.connections"], values["max.connections.per.ip"], values["max.connections.per.ip.overrides"])
        except LimitsError as exc:
            # Kafka's messages for a bad override are its Java exceptions' ("For input string: ..."):
            # at startup, name the property too.
            message = str(exc)
            raise ConfigError(message if "max.connections" in message
                              else f"max.connections.per.ip.overrides: {message}") from None
        if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms is above group.max.session.timeout.ms")
        for name in ("session.timeout.ms", "heartbeat.interval.ms"):
            low, high = values[f"group.consumer.min.{name}"], values[f"group.consumer.max.{name}"]
            if not low <= values[f"group.consumer.{name}"] <= high:
                raise ConfigError(f"group.consumer.{name} must be within group.consumer.min.{name} ({low}) and "
                                  f"group.consumer.max.{name} ({high})")
        if values["group.consumer.heartbeat.interval.ms"] >= values["group.consumer.session.timeout.ms"]:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms")
        _check_share_ranges(values)
        if values["group.streams.heartbeat.interval.ms"] >= values["group.streams.session.timeout.ms"]:
            raise ConfigError("group.streams.heartbeat.interval.ms must be below group.streams.session.timeout.ms")
        tags = [t.strip() for t in values["group.streams.rack.aware.assignment.tags"].split(",") if t.strip()]
        if len(set(tags)) != len(tags):
            raise ConfigError("group.streams.rack.aware.assignment.tags must not contain duplicate tag keys")
        policy = values["group.consumer.migration.policy"].strip().lower()
        if policy not in ("bidirectional", "upgrade", "downgrade", "disabled"):
            raise ConfigError(f"group.consumer.migration.policy: {values['group.consumer.migration.policy']!r}; "
                              "expected bidirectional, upgrade, downgrade or disabled")
        from broker.coordinators.group.core.consumer.assignors import ASSIGNORS

        names = [n.strip() for n in values["group.consumer.assignors"].split(",") if n.strip()]
        unknown = [n for n in names if n not in ASSIGNORS]
        if not names or unknown:
            raise ConfigError(f"group.consumer.assignors: {values['group.consumer.assignors']!r}; known assignors "
                              f"are {', '.join(sorted(ASSIGNORS))}")
        if values["etcd.endpoints"].strip() and not values["cluster.id"].strip():
            # Nodes sharing a data dir and a key space must agree on it before the first one writes.
            raise ConfigError("cluster.id must be set when etcd.endpoints is (every node of a cluster uses the same)")
        # An empty entry would mean the current directory, wherever the broker happens to be started.
        if not all(entry.strip() for entry in values["log.dirs"].split(",")):
            raise ConfigError(f"log.dirs: {values['log.dirs']!r} is empty or has an empty entry; name a directory")

    def __getitem__(self, name: str) -> ConfigValue:
        return self.values[name]

    # Typed reads of a property, for the property's declared type (a wrong one is a bug: raises).

    def get_int(self, name: str) -> int:
        value = self.values[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is not an int property")
        return value

    def get_str(self, name: str) -> str:
        value = self.values[name]
        if not isinstance(value, str):
            raise TypeError(f"{name} is not a string property")
        return value

    def get_bool(self, name: str) -> bool:
        value = self.values[name]
        if not isinstance(value, bool):
            raise TypeError(f"{name} is not a boolean property")
        return value

    def get_float(self, name: str) -> float:
        value = self.values[name]
        if not isinstance(value, float) or isinstance(value, bool):
            raise TypeError(f"{name} is not a float property")
        return value

    @property
    def data_dir(self) -> Path:
        return Path(self.values["log.dirs"].split(",")[0].strip())

    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike[str] | None = None,
        overrides: list[str] | tuple[str, ...] = (),
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        env = os.environ if environ is None else environ
        values = {p.name: p.default for p in PROPERTIES}
        given: set[str] = set()
        if config_file:
            for name, raw in _read_file(Path(config_file)).items():
                prop = _BY_NAME.get(name)
                if prop is None and name.startswith(LISTENER_PREFIX):
                    values[name] = str(raw)  # checked with the listeners (check_security)
                    given.add(name)
                    continue
                if prop is None:
                    raise ConfigError(f"unknown property {name!r} in {config_file}")
                values[name] = _coerce(prop, raw, str(config_file))
                given.add(name)
        for key, raw in env.items():
            if not key.startswith("KCOORD_"):
                continue
            prop = _BY_ENV.get(key)
            if prop is None:
                raise ConfigError(f"unknown property in environment variable {key}")
            values[prop.name] = _coerce(prop, raw, key)
            given.add(prop.name)
        for item in overrides:
            name, sep, raw = item.partition("=")
            name = name.strip()
            if not sep:
                raise ConfigError(f"--override expects name=value, got {item!r}")
            prop = _BY_NAME.get(name)
            if prop is None and name.startswith(LISTENER_PREFIX):
                values[name] = raw
                given.add(name)
                continue
            if prop is None:
                raise ConfigError(f"unknown property {name!r} in --override")
            values[name] = _coerce(prop, raw, "--override")
            given.add(name)
        return cls(values, frozenset(given))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_example_toml() -> str:
    """Every property with its default and meaning, as a TOML file kcoord accepts unchanged."""
    lines = [
        "# kcoord configuration: every property, set to its default.",
        "# Use with `kcoord serve --config kcoord.toml`. Environment variables KCOORD_<NAME> (dots as",
        "# underscores, upper case) override this file; --override name=value overrides both.",
        "",
    ]
    for prop in PROPERTIES:
        lines.append(f"# {prop.doc}" + (f" One of: {', '.join(prop.choices)}." if prop.choices else ""))
        lines.append(f'"{prop.name}" = {_toml_value(prop.default)}')
        lines.append("")
    return "\n".join(lines)


def render_markdown_table() -> str:
    rows = ["| property | default | env var | meaning |", "|---|---|---|---|"]
    for prop in PROPERTIES:
        env = "KCOORD_" + prop.name.upper().replace(".", "_")
        default = _toml_value(prop.default).strip('"') or '""'
        rows.append(f"| `{prop.name}` | `{default}` | `{env}` | {prop.doc} |")
    return "\n".join(rows)


def parse_metrics_listener(text: str, listener_host: str) -> tuple[str, int] | None:
    """(host, port) to serve metrics on, None when disabled. A URL without a host (the default,
    ``http://:9464``) takes the broker listener's host, so a broker on loopback does not expose
    its metrics on every interface."""
    return parse_http_listener("metrics.listener", text, listener_host)


def parse_http_listener(name: str, text: str, listener_host: str) -> tuple[str, int] | None:
    """(host, port) of the HTTP endpoint property ``name`` (metrics.listener, console.listener),
    None when empty; without a host, the broker listener's."""
    endpoint = _http_url(name, text, listener_host, ("http",))
    return None if endpoint is None else endpoint[1:]


def parse_console_listener(text: str, listener_host: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of console.listener, None when empty: ``http`` or ``https`` (TLS with
    the ssl.* properties of the broker's SSL listeners)."""
    return _http_url("console.listener", text, listener_host, ("http", "https"))


def _http_url(name: str, text: str, listener_host: str, schemes: tuple[str, ...]) -> tuple[str, str, int] | None:
    if not text.strip():
        return None
    parts = urlsplit(text if "://" in text else "http://" + text)
    if parts.scheme not in schemes or parts.port is None:
        raise ConfigError(f"{name}: expected {' or '.join(f'{s}://host:port' for s in schemes)}, got {text!r}")
    return parts.scheme, parts.hostname or listener_host, parts.port
