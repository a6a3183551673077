"""InitProducerId: a fresh producer id at epoch 0 on every call without a transactional id, as
Kafka answers idempotent producers (an epoch bump request gets a new id too); with a transactional
id, the transaction coordinator's answer (``broker.handlers.transactions``). v6 (KIP-939, unstable
in Kafka) is not advertised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.network.router import Request
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from broker.server import Broker

MAX_VERSION = 5


def register(broker: Broker, transactional: Callable[[Request[InitProducerIdRequest]], None]) -> None:
    allocator = broker.topic_logs.producer_ids

    def init_producer_id(req: Request[InitProducerIdRequest]) -> None:
        if req.body.transactional_id is not None:
            transactional(req)
            return
        req.reply.set(InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=allocator.next_id(),
                                             producer_epoch=0))

    broker.router.register(InitProducerIdRequest, InitProducerIdResponse, init_producer_id,
                           versions=(0, MAX_VERSION))
