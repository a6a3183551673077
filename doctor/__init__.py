"""The doctor: a rules engine over the rebalance journal's events that names what made a group
rebalance and what to change (``rules``). The broker's metrics, ``kcoord groups --doctor`` and the
Spark analysis apply the very same rules."""

from doctor.rules import RULES, Finding, Thresholds, diagnose, is_poll_eviction

__all__ = ["RULES", "Finding", "Thresholds", "diagnose", "is_poll_eviction"]
