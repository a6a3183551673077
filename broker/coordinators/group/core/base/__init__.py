"""What every kind of group shares, below them: the request context and config, records and
results, timers, the classic group model, offsets and the rebalance journal. The groups' models
(``consumer/``, ``share/``, ``streams/``) import it; the operations on the coordinator's whole state
(the modules of ``core/`` itself) import both."""
