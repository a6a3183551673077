"""DescribeAcls, CreateAcls and DeleteAcls: the authorizer's rules as admin clients manage them.
Describing needs Describe on the cluster, changing needs Alter (checked by the request
authorization, broker/handlers/request_checks.py); without an authorizer they answer
SECURITY_DISABLED, as Kafka does. Changes are durable before the answer: in the data dir file of a
single node, in etcd in a cluster (the answer then waits for etcd's commit)."""

from __future__ import annotations

from itertools import groupby

from broker.cluster.etcd import EtcdError
from broker.log_runtime.runtime import Spawner
from broker.network.router import Request
from broker.observability import logs
from broker.security.acl_model import AclBinding, AclFilter
from broker.security.authorizer import Authorizer
from broker.security.etcd_store import EtcdSecurityStore
from protocol.errors import ErrorCode
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse

_DISABLED = "No Authorizer is configured on the broker"


class AclApis:
    """DescribeAcls, CreateAcls and DeleteAcls, over the authorizer (and, in a cluster, etcd)."""

    def __init__(self, authorizer: Authorizer | None, etcd_store: EtcdSecurityStore | None, tasks: Spawner) -> None:
        self.authorizer = authorizer
        self.etcd_store = etcd_store
        self.tasks = tasks

    def describe(self, req: Request[DescribeAclsRequest]) -> None:
        if self.authorizer is None:
            req.reply.set(DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED,
                                               resources=[]))
            return
        b = req.body
        found = self.authorizer.describe(AclFilter(b.resource_type_filter, b.resource_name_filter, b.pattern_type_filter,
                                              b.principal_filter, b.host_filter, b.operation, b.permission_type))
        Resource = DescribeAclsResponse.Resource

        def key(a: AclBinding) -> tuple[int, str, int]:
            return a.resource_type, a.resource_name, a.pattern_type

        resources = [Resource(resource_type=t, resource_name=n, pattern_type=p, acls=[
            Resource.AclDescription(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission)
            for a in group]) for (t, n, p), group in groupby(sorted(found, key=key), key=key)]
        req.reply.set(DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None, resources=resources))

    def create(self, req: Request[CreateAclsRequest]) -> None:
        Result = CreateAclsResponse.AclCreationResult
        if self.authorizer is None:
            req.reply.set(CreateAclsResponse(results=[
                Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED) for _ in req.body.creations]))
            return
        results = []
        valid: list[AclBinding] = []
        for c in req.body.creations:
            binding = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                                 c.operation, c.permission_type)
            problem = binding.invalid()
            if problem is None:
                valid.append(binding)
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST if problem else ErrorCode.NONE,
                                  error_message=problem))
        if valid and self.etcd_store is not None:
            self.tasks.spawn(self.create_in_etcd, req, valid, results)
            return
        if valid:
            self.authorizer.add(valid)
            logs.event("acls.created", count=len(valid), principal=req.conn.principal)
        req.reply.set(CreateAclsResponse(results=results))

    async def create_in_etcd(self, req: Request[CreateAclsRequest], valid: list[AclBinding],
                             results: list[CreateAclsResponse.AclCreationResult]) -> None:
        assert self.etcd_store is not None
        try:
            await self.etcd_store.add_acls(valid)
        except EtcdError as exc:
            logs.warn("acls.etcd_write_failed", error=str(exc)[:200])
            for r in results:
                if r.error_code == ErrorCode.NONE:
                    r.error_code, r.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, "etcd is unavailable"
        else:
            logs.event("acls.created", count=len(valid), principal=req.conn.principal)
        req.reply.set(CreateAclsResponse(results=results))

    def delete(self, req: Request[DeleteAclsRequest]) -> None:
        FilterResult = DeleteAclsResponse.FilterResult
        if self.authorizer is None:
            req.reply.set(DeleteAclsResponse(filter_results=[
                FilterResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED, matching_acls=[])
                for _ in req.body.filters]))
            return
        filters = [AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                             f.host_filter, f.operation, f.permission_type) for f in req.body.filters]
        if self.etcd_store is not None:
            self.tasks.spawn(self.delete_in_etcd, req, filters)
            return
        self.answer_deleted(req, self.authorizer.remove(filters))

    async def delete_in_etcd(self, req: Request[DeleteAclsRequest], filters: list[AclFilter]) -> None:
        assert self.etcd_store is not None and self.authorizer is not None
        try:
            await self.etcd_store.load()  # what other nodes created a moment ago is matched too
            removed = self.authorizer.matching(filters)
            await self.etcd_store.remove_acls([a for group in removed for a in dict.fromkeys(group)])
        except EtcdError as exc:
            logs.warn("acls.etcd_write_failed", error=str(exc)[:200])
            req.reply.set(DeleteAclsResponse(filter_results=[DeleteAclsResponse.FilterResult(
                error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message="etcd is unavailable", matching_acls=[])
                for _ in filters]))
            return
        self.answer_deleted(req, removed)

    def answer_deleted(self, req: Request[DeleteAclsRequest], removed: list[list[AclBinding]]) -> None:
        FilterResult = DeleteAclsResponse.FilterResult
        Matching = FilterResult.MatchingAcl
        req.reply.set(DeleteAclsResponse(filter_results=[FilterResult(error_code=ErrorCode.NONE, error_message=None,
            matching_acls=[Matching(error_code=ErrorCode.NONE, error_message=None, resource_type=a.resource_type,
                                    resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal,
                                    host=a.host, operation=a.operation, permission_type=a.permission)
                           for a in group]) for group in removed]))
        if any(removed):
            logs.event("acls.deleted", count=sum(map(len, removed)), principal=req.conn.principal)
