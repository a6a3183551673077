"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken
(KIP-48), answered as Kafka 4.4 answers them.

Kafka's broker checks first (``KafkaApis``): no token request over PLAINTEXT, over SSL without a
client certificate, or from a connection that authenticated with a token
(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); a token for another owner needs CREATE_TOKENS on that
``User`` (DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be users (INVALID_PRINCIPAL_TYPE).
Then its controller decides (broker/security/tokens.py). A change is durable (the data dir, or etcd
in a cluster) before it is answered."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from broker.cluster.etcd import EtcdError
from broker.log_runtime.runtime import Spawner
from broker.network.router import Request
from broker.observability import logs
from broker.security.acl_model import Operation, ResourceType
from broker.security.authorizer import Authorizer
from broker.security.token_store import TokenStore
from broker.security.tokens import Changed, TokenInfo, split_principal
from protocol.errors import ErrorCode
from protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from protocol.messages.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from protocol.messages.renew_delegation_token import RenewDelegationTokenRequest, RenewDelegationTokenResponse

ANONYMOUS = "User:ANONYMOUS"
# What Kafka's broker answers for the timestamps of a token request it refuses itself.
ERROR_TIMESTAMP = -1

TokenRequest = TypeVar("TokenRequest", CreateDelegationTokenRequest, RenewDelegationTokenRequest,
                       ExpireDelegationTokenRequest, DescribeDelegationTokenRequest)


class DelegationTokenApis:
    def __init__(self, store: TokenStore, authorizer: Authorizer | None, protocols: Mapping[str, str],
                 now_ms: Callable[[], int], tasks: Spawner) -> None:
        self.store = store
        self.tokens = store.tokens
        self.authorizer = authorizer
        # Listener name -> security protocol.
        self.protocols = protocols
        self.now_ms = now_ms
        self.tasks = tasks

    def _allowed(self, req: Request[TokenRequest]) -> bool:
        """Kafka's ``allowTokenRequests``."""
        protocol = self.protocols.get(req.listener, "PLAINTEXT")
        return not (req.conn.token_authenticated or protocol == "PLAINTEXT"
                    or (protocol == "SSL" and req.principal == ANONYMOUS))

    def _authorized(self, req: Request[TokenRequest], operation: int, resource_type: int, name: str) -> bool:
        return self.authorizer is None or self.authorizer.authorize(req.principal, req.client_host, operation,
                                                                    resource_type, name)

    # ---- create ------------------------------------------------------------------------------

    def create(self, req: Request[CreateDelegationTokenRequest]) -> None:
        body = req.body
        requester = req.principal
        owner = (f"{body.owner_principal_type}:{body.owner_principal_name}" if body.owner_principal_name
                 else requester)

        def refuse(code: int, timestamp: int = ERROR_TIMESTAMP) -> None:
            req.reply.set(_created(code, owner, requester, None, timestamp))

        if not self._allowed(req):
            return refuse(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        if owner != requester and not self._authorized(req, Operation.CREATE_TOKENS, ResourceType.USER, owner):
            return refuse(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
        if any(r.principal_type != "User" for r in body.renewers):
            return refuse(ErrorCode.INVALID_PRINCIPAL_TYPE)
        created = self.tokens.create(requester, owner, [f"{r.principal_type}:{r.principal_name}" for r in body.renewers],
                                     body.max_lifetime_ms, self.now_ms())
        if created.token is None:
            return refuse(created.error, 0)  # the controller's refusals leave the timestamps unset
        token = created.token
        self.tasks.spawn(self._persist, req, [token], [], lambda: req.reply.set(
            _created(ErrorCode.NONE, owner, requester, token, 0, self.tokens.hmac(token.token_id))),
            lambda: refuse(ErrorCode.UNKNOWN_SERVER_ERROR), "created")

    # ---- renew and expire --------------------------------------------------------------------

    def renew(self, req: Request[RenewDelegationTokenRequest]) -> None:
        if not self._allowed(req):
            req.reply.set(RenewDelegationTokenResponse(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                                       expiry_timestamp_ms=ERROR_TIMESTAMP))
            return
        changed = self.tokens.renew(req.principal, req.body.hmac, req.body.renew_period_ms, self.now_ms())
        self._change(req, changed, RenewDelegationTokenResponse, "renewed")

    def expire(self, req: Request[ExpireDelegationTokenRequest]) -> None:
        if not self._allowed(req):
            req.reply.set(ExpireDelegationTokenResponse(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                                        expiry_timestamp_ms=ERROR_TIMESTAMP))
            return
        changed = self.tokens.expire(req.principal, req.body.hmac, req.body.expiry_time_period_ms, self.now_ms())
        self._change(req, changed, ExpireDelegationTokenResponse, "expired" if changed.forget else "expiry_moved")

    def _change(self, req: Request[RenewDelegationTokenRequest] | Request[ExpireDelegationTokenRequest],
                changed: Changed,
                response: type[RenewDelegationTokenResponse] | type[ExpireDelegationTokenResponse],
                what: str) -> None:
        def answer(code: int, expiry: int) -> None:
            req.reply.set(response(error_code=code, expiry_timestamp_ms=expiry))

        if changed.keep is None and changed.forget is None:
            return answer(changed.error, changed.expiry_ms)
        self.tasks.spawn(self._persist, req, [changed.keep] if changed.keep else [],
                         [changed.forget] if changed.forget else [],
                         lambda: answer(changed.error, changed.expiry_ms),
                         lambda: answer(ErrorCode.UNKNOWN_SERVER_ERROR, 0), what)

    async def _persist(self, req: Request[TokenRequest], keep: list[TokenInfo], forget: list[str],
                       done: Callable[[], None], failed: Callable[[], None], what: str) -> None:
        try:
            await self.store.alter_tokens(keep, forget)  # durable before the answer
        except (EtcdError, OSError) as exc:
            logs.warn("delegation_tokens.write_failed", error=str(exc)[:200])
            failed()
            return
        logs.event(f"delegation_token.{what}", token=(keep[0].token_id if keep else forget[0]),
                   principal=req.principal)
        done()

    # ---- describe ----------------------------------------------------------------------------

    def describe(self, req: Request[DescribeDelegationTokenRequest]) -> None:
        def answer(code: int, tokens: list[DescribeDelegationTokenResponse.DescribedDelegationToken]) -> None:
            req.reply.set(DescribeDelegationTokenResponse(error_code=code, tokens=tokens))

        if not self._allowed(req):
            return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
        if not self.tokens.enabled:
            return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
        owners = req.body.owners
        if owners is not None and not owners:
            return answer(ErrorCode.NONE, [])
        wanted = None if owners is None else [f"{o.principal_type}:{o.principal_name}" for o in owners]

        def eligible(token: TokenInfo) -> bool:
            """Kafka's ``DelegationTokenManager.filterToken``."""
            if wanted is not None and not any(token.owner_or_renewer(p) for p in wanted):
                return False
            if token.owner_or_renewer(req.principal):
                return True
            return (self._authorized(req, Operation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
                    or self._authorized(req, Operation.DESCRIBE_TOKENS, ResourceType.USER, token.owner))

        answer(ErrorCode.NONE, [_described(t, self.tokens.hmac(t.token_id))
                                for t in self.tokens.tokens.values() if eligible(t)])


def _created(code: int, owner: str, requester: str, token: TokenInfo | None, timestamp: int,
             mac: bytes = b"") -> CreateDelegationTokenResponse:
    owner_type, owner_name = split_principal(owner)
    requester_type, requester_name = split_principal(requester)
    return CreateDelegationTokenResponse(
        error_code=code, principal_type=owner_type, principal_name=owner_name,
        token_requester_principal_type=requester_type, token_requester_principal_name=requester_name,
        issue_timestamp_ms=token.issue_ms if token else timestamp,
        expiry_timestamp_ms=token.expiry_ms if token else timestamp,
        max_timestamp_ms=token.max_ms if token else timestamp,
        token_id=token.token_id if token else "", hmac=mac)


def _described(token: TokenInfo, mac: bytes) -> DescribeDelegationTokenResponse.DescribedDelegationToken:
    Described = DescribeDelegationTokenResponse.DescribedDelegationToken
    owner_type, owner_name = split_principal(token.owner)
    requester_type, requester_name = split_principal(token.requester)
    return Described(
        principal_type=owner_type, principal_name=owner_name, token_requester_principal_type=requester_type,
        token_requester_principal_name=requester_name, issue_timestamp=token.issue_ms,
        expiry_timestamp=token.expiry_ms, max_timestamp=token.max_ms, token_id=token.token_id, hmac=mac,
        renewers=[Described.DescribedDelegationTokenRenewer(principal_type=k, principal_name=n)
                  for k, n in map(split_principal, token.renewers)])
