"""What the broker's security needs at run time, built once from the configuration: the SASL
mechanisms offered, the SCRAM credential store (with its bootstrap users), and the TLS context."""

from __future__ import annotations

import ssl
from pathlib import Path

from broker.config import BrokerConfig
from broker.security import tls
from broker.security.authorizer import Authorizer
from broker.security.credentials import CredentialStore
from broker.security.properties import bootstrap_users, enabled_mechanisms, super_users


class SecurityContext:
    def __init__(self, config: BrokerConfig, data_dir: Path) -> None:
        self.mechanisms = enabled_mechanisms(config.values)
        self.credentials = CredentialStore(data_dir)
        self.credentials.bootstrap(bootstrap_users(config.values))
        self.ssl_context: ssl.SSLContext | None = None
        if any(spec.tls for spec in config.listeners):
            try:
                self.ssl_context = tls.server_context(config.values)
            except (OSError, ssl.SSLError) as exc:
                raise SystemExit(f"kcoord: cannot load the TLS keystore or truststore: {exc}") from None
        self.handshake_timeout = config["ssl.handshake.timeout.ms"] / 1000
        self.max_unauthenticated_bytes: int = config["sasl.server.max.receive.size"]
        self.authorizer: Authorizer | None = None
        if str(config["authorizer.class.name"]).strip():
            self.authorizer = Authorizer(data_dir, super_users(config.values),
                                         config["allow.everyone.if.no.acl.found"])
