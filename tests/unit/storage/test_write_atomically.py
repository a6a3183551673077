"""Files replaced whole: several processes replacing the same file at once (a cluster's nodes
starting together on one volume, each writing meta.properties) all succeed, and the file is always
one of their versions, whole."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from storage.layout import write_atomically

ROUNDS = 200


def _writer(path: str, tag: int, errors: multiprocessing.Queue[str]) -> None:
    try:
        for _ in range(ROUNDS):
            write_atomically(Path(path), (b"writer-%d\n" % tag) * 100)
    except Exception as exc:
        errors.put(repr(exc))


def test_processes_replacing_one_file_at_once_all_succeed(tmp_path: Path) -> None:
    target = tmp_path / "meta.properties"
    ctx = multiprocessing.get_context("fork")
    errors: multiprocessing.Queue[str] = ctx.Queue()
    writers = [ctx.Process(target=_writer, args=(str(target), tag, errors)) for tag in range(3)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
    assert [w.exitcode for w in writers] == [0, 0, 0]
    assert errors.empty(), errors.get()
    assert target.read_bytes() in {(b"writer-%d\n" % tag) * 100 for tag in range(3)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.properties"]
