"""The transaction coordinator as a pure state machine: no trio, no I/O, no clock reads.

``TransactionCoordinator`` answers InitProducerId (with a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn from the metadata of each transactional id, emits the
``__transaction_state`` records that persist every change, and names the markers to write when a
transaction ends. The broker shell (``broker.coordinators.transaction.service``) makes the records durable, writes the
markers, and feeds completions and timer ticks back in; startup replays the records.
"""
