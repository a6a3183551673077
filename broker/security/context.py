"""What the broker's security needs at run time, built once from the configuration: the SASL
mechanisms offered, the SCRAM credential store (with its bootstrap users), the authorizer, and the
TLS context. A single node keeps users and ACLs in its data dir; a cluster (``etcd`` given) keeps
them in etcd, loaded before the node serves (broker/security/etcd_store.py)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from broker.cluster.etcd import EtcdClient
from broker.security import tls
from broker.security.authorizer import Authorizer
from broker.security.credentials import CredentialStore
from broker.security.etcd_store import EtcdSecurityStore
from broker.security.keystores import KeystoreError
from broker.security.listeners import ListenerSpec
from broker.security.properties import bootstrap_users, listener_sasl, super_users
from broker.security.token_store import FileTokenStore, TokenStore
from broker.security.tokens import DelegationTokens


class SecurityConfig(Protocol):
    """The broker's configuration as security reads it (``broker.configs.node_config.BrokerConfig``)."""

    @property
    def values(self) -> Mapping[str, Any]: ...

    @property
    def listeners(self) -> list[ListenerSpec]: ...

    def get_str(self, name: str) -> str: ...

    def get_int(self, name: str) -> int: ...

    def get_bool(self, name: str) -> bool: ...


class SecurityContext:
    def __init__(self, config: SecurityConfig, data_dir: Path, etcd: tuple[EtcdClient, str] | None = None) -> None:
        # Each SASL listener's mechanisms and their settings.
        self.sasl_listeners = {spec.name: listener_sasl(config.values, spec.name) for spec in config.listeners
                               if spec.sasl}
        # OAUTHBEARER listeners validating signed tokens: their identity providers' key sets.
        self.jwks = [s.jwks for s in self.sasl_listeners.values() if s.jwks is not None]
        files = data_dir if etcd is None else None
        self.credentials = CredentialStore(files)
        if etcd is None:
            self.credentials.bootstrap(bootstrap_users(config.values))
        self.ssl_context: ssl.SSLContext | None = None
        if any(spec.tls for spec in config.listeners):
            try:
                self.ssl_context = tls.server_context(config.values)
            except (OSError, ssl.SSLError, KeystoreError) as exc:
                raise SystemExit(f"kcoord: cannot load the TLS keystore or truststore: {exc}") from None
        self.principal_mapper = tls.PrincipalMapper(config.get_str("ssl.principal.mapping.rules"))
        self.handshake_timeout = config.get_int("ssl.handshake.timeout.ms") / 1000
        self.max_unauthenticated_bytes = config.get_int("sasl.server.max.receive.size")
        self.authorizer: Authorizer | None = None
        if config.get_str("authorizer.class.name").strip():
            self.authorizer = Authorizer(files, super_users(config.values),
                                         config.get_bool("allow.everyone.if.no.acl.found"))
        secret = config.get_str("delegation.token.secret.key")
        self.tokens = DelegationTokens(secret.encode() if secret else None,
                                       config.get_int("delegation.token.max.lifetime.ms"),
                                       config.get_int("delegation.token.expiry.time.ms"))
        self.token_check_interval_ms = config.get_int("delegation.token.expiry.check.interval.ms")
        self.etcd_store: EtcdSecurityStore | None = None
        self.token_store: TokenStore
        if etcd is not None:
            self.etcd_store = EtcdSecurityStore(etcd[0], etcd[1], self.authorizer, self.credentials,
                                                bootstrap_users(config.values), data_dir, self.tokens)
            self.token_store = self.etcd_store
        else:
            self.token_store = FileTokenStore(data_dir, self.tokens)
