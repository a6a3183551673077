"""Ports handed to the servers of one test process are never handed out twice."""

from __future__ import annotations

from testkit.ports import free_port


def test_a_port_is_handed_out_once() -> None:
    # Nothing listens on any of them in between: the kernel alone would repeat some (with ~28,000
    # ephemeral ports, 500 askings repeat one nearly always).
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)
