"""InitProducerId for idempotent producers: a fresh producer id at epoch 0 on every call, as Kafka
answers when there is no transactional id (an epoch bump request gets a new id too).

Transactions are not supported: a transactional id gets INVALID_REQUEST, the same non-retriable
answer FindCoordinator gives for transaction coordinators, so a transactional producer fails at
once instead of retrying. v6 (KIP-939, unstable in Kafka) is not advertised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.network.router import Request
from broker.observability import logs
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from broker.server import Broker

MAX_VERSION = 5


def register(broker: Broker) -> None:
    allocator = broker.topic_logs.producer_ids

    def init_producer_id(req: Request[InitProducerIdRequest]) -> None:
        body = req.body
        if body.transactional_id is not None:
            logs.warn("producer.transactional_refused", transactional_id=body.transactional_id,
                      client_id=req.header.client_id)
            req.reply.set(InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                                 producer_id=-1, producer_epoch=-1))
            return
        req.reply.set(InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=allocator.next_id(),
                                             producer_epoch=0))

    broker.router.register(InitProducerIdRequest, InitProducerIdResponse, init_producer_id,
                           versions=(0, MAX_VERSION))
