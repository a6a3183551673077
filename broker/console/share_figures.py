"""A share group's delivery figures on its console page: records in flight (acquired, or available
for another delivery), redeliveries, expired acquisition locks and records archived at the
delivery limit (poison records), as this node's share metrics count them (``broker/share/metrics.py``,
computed from its share partitions when asked). Share partitions are served by one node: the
node whose console is open shows its own."""

from __future__ import annotations

from collections.abc import Iterable

from broker.groups.state_metrics import Family

# Metric family -> the figure it gives (a family with a state label gives one figure per state).
FIGURES = {
    "kcoord_share_records_in_flight": "in flight",
    "kcoord_share_redeliveries": "redelivered",
    "kcoord_share_lock_expiries": "lock expiries",
    "kcoord_share_archived_at_delivery_limit": "archived at the delivery limit",
}
ORDER = ("in flight: acquired", "in flight: available", "redelivered", "lock expiries",
         "archived at the delivery limit")


def share_figures(families: Iterable[Family], group_id: str) -> dict[str, int]:
    """The figures of ``group_id`` (each of ``ORDER``, 0 when its partitions counted none)."""
    out = dict.fromkeys(ORDER, 0)
    for name, _help, labels, samples in families:
        figure = FIGURES.get(name)
        if figure is None:
            continue
        for values, value in samples:
            by_label = dict(zip(labels, values, strict=True))
            if by_label.get("group") != group_id:
                continue
            key = f"{figure}: {by_label['state']}" if "state" in by_label else figure
            if key in out:
                out[key] += int(value)
    return out
