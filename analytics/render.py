"""The report's rendering primitives, shared by its sections: times in UTC, matplotlib figures
as embedded PNG, HTML tables."""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
from typing import Any


def utc(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only, whatever display the machine has
    import matplotlib.pyplot as plt

    return plt


def time_axis(ax: Any) -> None:
    """Ticks and labels fitted to the span shown, seconds to years: a fixed minute format would
    repeat one label along a log of a few seconds."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(tz=dt.UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=dt.UTC))
    ax.set_xlabel("UTC")


def png_of(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def html_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            if isinstance(v, list):
                v = ", ".join(map(str, v))
            elif isinstance(v, dt.datetime):
                v = v.strftime("%Y-%m-%d %H:%M:%S")
            cells.append(f"<td>{html.escape('' if v is None else str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
