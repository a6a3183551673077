"""The transaction coordinator's shell: its ``__transaction_state`` logs, loading by replay, the
markers it writes, and the timer that aborts expired transactions. The rules live in the pure
``broker.coordinators.transaction.core``."""
