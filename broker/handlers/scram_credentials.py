"""DescribeUserScramCredentials and AlterUserScramCredentials: SCRAM users as Kafka's admin clients
manage them. A change is durable before it is acknowledged (in the data dir of a single node, in
etcd in a cluster); new credentials are used by the next authentication, on every node."""

from __future__ import annotations

from collections import Counter

from broker.cluster.etcd import EtcdError
from broker.log_runtime.runtime import Spawner
from broker.network.router import Request
from broker.observability import logs
from broker.security.credentials import CredentialStore
from broker.security.etcd_store import EtcdSecurityStore
from broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
)
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)


class ScramCredentialApis:
    """DescribeUserScramCredentials and AlterUserScramCredentials, over the credential store."""

    def __init__(self, store: CredentialStore, etcd_store: EtcdSecurityStore | None, tasks: Spawner) -> None:
        self.store = store
        self.etcd_store = etcd_store
        self.tasks = tasks

    def describe(self, req: Request[DescribeUserScramCredentialsRequest]) -> None:
        Result = DescribeUserScramCredentialsResponse.Result
        Info = Result.CredentialInfo
        # None or an empty list: every user with credentials, as Kafka answers.
        asked = sorted(self.store.users) if not req.body.users else [u.name for u in req.body.users]
        counts = Counter(asked)
        results = []
        for user in dict.fromkeys(asked):
            if counts[user] > 1:
                results.append(Result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                      error_message=f"Cannot describe SCRAM credentials for the same user twice "
                                                    f"in a single request: {user}", credential_infos=[]))
                continue
            mechanisms = self.store.users.get(user)
            if not mechanisms:
                results.append(Result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                      error_message=f"Attempt to describe a user credential that does not "
                                                    f"exist: {user}", credential_infos=[]))
                continue
            results.append(Result(user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=[
                Info(mechanism=MECHANISMS[m][1], iterations=c.iterations) for m, c in sorted(mechanisms.items())]))
        req.reply.set(DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, error_message=None,
                                                           results=results))

    def alter(self, req: Request[AlterUserScramCredentialsRequest]) -> None:
        body = req.body
        errors: dict[str, tuple[int, str]] = {}
        seen = Counter([(d.name, d.mechanism) for d in body.deletions] +
                       [(u.name, u.mechanism) for u in body.upsertions])
        users = list(dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions]))

        def reject(user: str, code: int, message: str) -> None:
            errors.setdefault(user, (code, message))

        for (user, mechanism), count in seen.items():
            if count > 1:
                reject(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same "
                                                           "request")
            if not user:
                reject(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            if mechanism not in MECHANISM_BY_CODE:
                reject(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        for u in body.upsertions:
            if not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
                reject(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                       f"Iterations {u.iterations} not in the range {MIN_ITERATIONS}..{MAX_ITERATIONS}")
            if not u.salt or not u.salted_password:
                reject(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        for d in body.deletions:
            mechanism_name = MECHANISM_BY_CODE.get(d.mechanism)
            if mechanism_name is not None and self.store.lookup(d.name, mechanism_name) is None:
                reject(d.name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not "
                                                             "exist")
        deletes = [(d.name, MECHANISM_BY_CODE[d.mechanism]) for d in body.deletions if d.name not in errors]
        upserts = [(u.name, ScramCredential.from_salted_password(MECHANISM_BY_CODE[u.mechanism], u.salt, u.iterations,
                                                                 u.salted_password))
                   for u in body.upsertions if u.name not in errors]
        if self.etcd_store is not None and (deletes or upserts):
            self.tasks.spawn(self.alter_in_etcd, req, users, errors, deletes, upserts)
            return
        changed = False
        for user, mechanism_name in deletes:
            changed |= self.store.delete(user, mechanism_name)
        for user, credential in upserts:
            self.store.upsert(user, credential)
            changed = True
        if changed:
            self.store.save()  # durable before the answer
            self.altered(req, users, errors)
        self.answer(req, users, errors)

    async def alter_in_etcd(self, req: Request[AlterUserScramCredentialsRequest], users: list[str],
                            errors: dict[str, tuple[int, str]], deletes: list[tuple[str, str]],
                            upserts: list[tuple[str, ScramCredential]]) -> None:
        assert self.etcd_store is not None
        try:
            await self.etcd_store.alter_credentials(upserts, deletes)  # committed in etcd before the answer
        except EtcdError as exc:
            logs.warn("scram.etcd_write_failed", error=str(exc)[:200])
            for user in users:
                errors.setdefault(user, (ErrorCode.UNKNOWN_SERVER_ERROR, "etcd is unavailable"))
        else:
            self.altered(req, users, errors)
        self.answer(req, users, errors)

    def altered(self, req: Request[AlterUserScramCredentialsRequest], users: list[str],
                errors: dict[str, tuple[int, str]]) -> None:
        logs.event("scram.credentials_altered", users=",".join(u for u in users if u not in errors),
                   principal=req.conn.principal)

    def answer(self, req: Request[AlterUserScramCredentialsRequest], users: list[str],
               errors: dict[str, tuple[int, str]]) -> None:
        Result = AlterUserScramCredentialsResponse.Result
        req.reply.set(AlterUserScramCredentialsResponse(results=[
            Result(user=user, error_code=errors.get(user, (0, None))[0], error_message=errors.get(user, (0, None))[1])
            for user in users]))
