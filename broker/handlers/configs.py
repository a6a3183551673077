"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and ListConfigResources: the configs of
topics, brokers, groups and client-metrics subscriptions as admin clients and ``kafka-configs`` read and change them. Each
resource is answered on its own; a change is durable and in effect before its answer leaves
(broker/configs/service.py)."""

from __future__ import annotations

from broker.cluster.etcd import EtcdError
from broker.cluster.view import ClusterView
from broker.configs.model import ConfigSource, ConfigType, ResourceType
from broker.configs.service import Change, ConfigError, ConfigService
from broker.log_runtime.runtime import Spawner
from broker.network.router import Request
from broker.observability import logs
from broker.telemetry.subscriptions import INTERVAL_MS, SubscriptionStore
from broker.topics.catalog import TopicError
from protocol.errors import ErrorCode
from protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse


class ConfigApis:
    def __init__(self, service: ConfigService, view: ClusterView, subscriptions: SubscriptionStore | None = None,
                 tasks: Spawner | None = None) -> None:
        """``subscriptions`` holds the client-metrics resources (type 16); ``tasks`` runs a change
        of them that must be committed in etcd before its answer."""
        self.service = service
        self.view = view
        self.subscriptions = subscriptions
        self.tasks = tasks

    def _describe_client_metrics(self, name: str, keys: list[str] | None,
                                 synonyms: bool) -> list[DescribeConfigsResponse.Result.ResourceResult]:
        """The subscription's three configs: what it sets (its own synonym), defaults for the rest."""
        Entry = DescribeConfigsResponse.Result.ResourceResult
        assert self.subscriptions is not None
        own = self.subscriptions.configs.get(name, {})
        out = []
        for k, v in self.subscriptions.describe_config(name):
            if keys is not None and k not in keys:
                continue
            source = ConfigSource.CLIENT_METRICS_CONFIG if k in own else ConfigSource.DEFAULT_CONFIG
            out.append(Entry(name=k, value=v, read_only=False, config_source=source,
                             is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=False,
                             synonyms=[Entry.Synonym(name=k, value=v, source=source)] if synonyms and k in own else [],
                             config_type=ConfigType.INT if k == INTERVAL_MS else ConfigType.LIST, documentation=None))
        return out

    def describe_configs(self, req: Request[DescribeConfigsRequest]) -> None:
        body = req.body
        synonyms = req.version >= 1 and body.include_synonyms
        docs = req.version >= 3 and body.include_documentation
        Entry = DescribeConfigsResponse.Result.ResourceResult
        results = []
        for res in body.resources:
            if res.resource_type == ResourceType.CLIENT_METRICS and self.subscriptions is not None:
                results.append(DescribeConfigsResponse.Result(
                    error_code=ErrorCode.NONE, error_message=None, resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=self._describe_client_metrics(res.resource_name, res.configuration_keys or None,
                                                          synonyms)))
                continue
            try:
                # An empty list of keys asks for every config, as null does (Kafka's ConfigHelper).
                found = self.service.describe(res.resource_type, res.resource_name, res.configuration_keys or None)
                error: int = ErrorCode.NONE
                message = None
            except ConfigError as exc:
                found, error, message = [], exc.error_code, exc.message
            entries = [Entry(
                name=d.name, value=d.value, read_only=d.read_only, config_source=d.source,
                is_default=d.source == ConfigSource.DEFAULT_CONFIG, is_sensitive=d.sensitive,
                synonyms=[Entry.Synonym(name=n, value=v, source=s) for n, v, s in d.synonyms] if synonyms else [],
                config_type=d.type, documentation=d.doc if docs else None) for d in found]
            results.append(DescribeConfigsResponse.Result(
                error_code=error, error_message=message, resource_type=res.resource_type,
                resource_name=res.resource_name, configs=entries))
        req.reply.set(DescribeConfigsResponse(results=results))

    def _alter(self, resource_type: int, name: str, changes: list[Change], incremental: bool,
               validate_only: bool) -> tuple[int, str | None]:
        try:
            self.service.alter(resource_type, name, changes, incremental=incremental, validate_only=validate_only)
        except ConfigError as exc:
            return exc.error_code, exc.message
        except TopicError as exc:  # deleted meanwhile
            return exc.error_code, str(exc)
        except OSError as exc:
            logs.warn("configs.write_failed", resource_type=resource_type, resource=name, error=str(exc))
            return ErrorCode.KAFKA_STORAGE_ERROR, "the change could not be made durable"
        if not validate_only:
            logs.event("configs.altered", resource_type=resource_type, resource=name,
                       configs=sorted(c.name for c in changes), incremental=incremental)
        return ErrorCode.NONE, None

    def alter_configs(self, req: Request[AlterConfigsRequest]) -> None:
        Response = AlterConfigsResponse.ResourceResponse
        responses = []
        for res in req.body.resources:
            changes = [Change(c.name, 0, c.value) for c in res.configs]
            code, message = self._alter(res.resource_type, res.resource_name, changes, False, req.body.validate_only)
            responses.append(Response(error_code=code, error_message=message, resource_type=res.resource_type,
                                      resource_name=res.resource_name))
        req.reply.set(AlterConfigsResponse(responses=responses))

    def incremental_alter_configs(self, req: Request[IncrementalAlterConfigsRequest]) -> None:
        store = self.subscriptions
        metrics = any(r.resource_type == ResourceType.CLIENT_METRICS for r in req.body.resources)
        if metrics and store is not None and store.remote is not None and self.tasks is not None:
            # Client-metrics subscriptions are committed in etcd before the answer.
            self.tasks.spawn(self._incremental_in_etcd, req)
            return
        Response = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
        responses = []
        for res in req.body.resources:
            changes = [Change(c.name, c.config_operation, c.value) for c in res.configs]
            if res.resource_type == ResourceType.CLIENT_METRICS and store is not None:
                code, message = self._alter_metrics_local(res.resource_name, changes, req.body.validate_only)
            else:
                code, message = self._alter(res.resource_type, res.resource_name, changes, True,
                                            req.body.validate_only)
            responses.append(Response(error_code=code, error_message=message, resource_type=res.resource_type,
                                      resource_name=res.resource_name))
        req.reply.set(IncrementalAlterConfigsResponse(responses=responses))

    def _alter_metrics_local(self, name: str, changes: list[Change], validate_only: bool) -> tuple[int, str | None]:
        assert self.subscriptions is not None
        try:
            error = self.subscriptions.alter_config(name, [(c.name, c.op, c.value) for c in changes], validate_only)
        except OSError as exc:
            logs.warn("configs.write_failed", resource_type=ResourceType.CLIENT_METRICS, resource=name, error=str(exc))
            return ErrorCode.KAFKA_STORAGE_ERROR, "the change could not be made durable"
        if error is not None:
            return error.code, error.message
        if not validate_only:
            logs.event("configs.altered", resource_type=ResourceType.CLIENT_METRICS, resource=name,
                       configs=sorted(c.name for c in changes), incremental=True)
        return ErrorCode.NONE, None

    async def _incremental_in_etcd(self, req: Request[IncrementalAlterConfigsRequest]) -> None:
        assert self.subscriptions is not None
        Response = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
        responses = []
        for res in req.body.resources:
            changes = [Change(c.name, c.config_operation, c.value) for c in res.configs]
            if res.resource_type == ResourceType.CLIENT_METRICS:
                try:
                    error = await self.subscriptions.alter(res.resource_name, [(c.name, c.op, c.value) for c in changes],
                                                           req.body.validate_only)
                    code, message = (ErrorCode.NONE, None) if error is None else (error.code, error.message)
                except EtcdError as exc:
                    logs.warn("configs.etcd_write_failed", resource=res.resource_name, error=str(exc)[:200])
                    code, message = ErrorCode.UNKNOWN_SERVER_ERROR, "etcd is unavailable"
            else:
                code, message = self._alter(res.resource_type, res.resource_name, changes, True,
                                            req.body.validate_only)
            responses.append(Response(error_code=code, error_message=message, resource_type=res.resource_type,
                                      resource_name=res.resource_name))
        req.reply.set(IncrementalAlterConfigsResponse(responses=responses))

    def list_config_resources(self, req: Request[ListConfigResourcesRequest]) -> None:
        Resource = ListConfigResourcesResponse.ConfigResource
        if req.version == 0:
            # v0 lists client-metrics resources only.
            req.reply.set(ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=[
                Resource(resource_name=n, resource_type=ResourceType.CLIENT_METRICS) for n in self._metric_names()]))
            return
        unsupported = [t for t in req.body.resource_types if t not in (2, 4, 8, 16, 32)]
        if unsupported:
            req.reply.set(ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[]))
            return
        nodes = [n for n, _h, _p in self.view.live_nodes(req.listener)]
        found = self.service.list_resources(list(req.body.resource_types), nodes)
        if not req.body.resource_types or ResourceType.CLIENT_METRICS in req.body.resource_types:
            found += [(n, ResourceType.CLIENT_METRICS) for n in self._metric_names()]
        req.reply.set(ListConfigResourcesResponse(
            error_code=ErrorCode.NONE, config_resources=[Resource(resource_name=n, resource_type=t) for n, t in found]))

    def _metric_names(self) -> list[str]:
        return [] if self.subscriptions is None else sorted(self.subscriptions.configs)
