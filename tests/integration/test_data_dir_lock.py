"""One data dir, one broker: a second `kcoord serve` on a dir in use stops at once and changes nothing;
a broker killed with SIGKILL leaves a `.lock` file that does not keep the next one from starting."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.kcoord import KCOORD, ROOT, BrokerProcess
from testkit.ports import api_versions_ok

pytestmark = pytest.mark.timeout(120)

SMALL = {"offsets.topic.num.partitions": "3"}


def _snapshot(data_dir: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under the data dir with its mtime, size and content hash."""
    out = {}
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            st = path.stat()
            out[str(path.relative_to(data_dir))] = (st.st_mtime_ns, st.st_size,
                                                    hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def _healthy(b: BrokerProcess) -> bool:
    done = subprocess.run([*KCOORD, "health", "--bootstrap", b.bootstrap], cwd=ROOT, capture_output=True,
                          timeout=30)
    return done.returncode == 0 and api_versions_ok(b.port)


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_second_broker_on_the_same_dir_is_refused_and_touches_nothing(broker_factory) -> None:
    first = broker_factory(SMALL)
    data_dir = first.data_dir
    before = _snapshot(data_dir)
    assert {".lock", "meta.properties"} <= before.keys()
    assert any(name.endswith(".index") for name in before)

    second = BrokerProcess(data_dir, SMALL)
    done = second.run_to_exit(timeout=30)

    assert done.returncode == 1, done
    line = _one_line(done.stderr)
    assert str(data_dir) in line and ".lock" in line, line
    assert _snapshot(data_dir) == before
    assert _healthy(first)


def test_a_killed_broker_leaves_a_stale_lock_file_that_blocks_nothing(broker_factory) -> None:
    first = broker_factory(SMALL)
    first.kill()
    assert (first.data_dir / ".lock").exists()

    again = broker_factory(SMALL, data_dir=first.data_dir)
    assert _healthy(again)
    assert again.stop() == 0


@pytest.mark.parametrize(
    ("make", "code", "expected"),
    [
        pytest.param(lambda tmp: _file(tmp), 1, "{tmp}/plain is a file, not a directory", id="regular-file"),
        pytest.param(lambda tmp: _file(tmp) / "sub", 1,
                     "cannot create {tmp}/plain/sub: {tmp}/plain is a file, not a directory", id="under-a-file"),
        pytest.param(lambda tmp: "", 2, "configuration error: log.dirs", id="empty"),
        pytest.param(lambda tmp: " , ", 2, "configuration error: log.dirs", id="empty-entries"),
    ],
)
def test_bad_log_dirs_stop_startup_with_one_line(tmp_path: Path, make, code: int, expected: str) -> None:
    value = str(make(tmp_path))
    b = BrokerProcess(tmp_path / "unused", {"log.dirs": value})
    done = b.run_to_exit()
    assert done.returncode == code, done
    line = _one_line(done.stderr)
    assert line.startswith("kcoord: ") and expected.format(tmp=tmp_path) in line, line
    if (tmp_path / "plain").exists():
        assert (tmp_path / "plain").read_text() == "not a directory"


def _file(tmp: Path) -> Path:
    f = tmp / "plain"
    f.write_text("not a directory")
    return f


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory the broker cannot write to, and the reason the broker should give.

    Root bypasses permission bits, so for root a mode 0555 directory would stop nothing and the case would
    test nothing; root cannot write to a read-only file system, so then the directory is a tmpfs mounted
    read-only instead."""
    target = tmp_path / "ro"
    target.mkdir()
    if os.geteuid() != 0:
        target.chmod(0o555)
        try:
            yield target, "permission denied"
        finally:
            target.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(target)], capture_output=True)
    if done.returncode:
        pytest.skip("running as root (permission bits do not apply) and cannot mount a read-only tmpfs here: "
                    + done.stderr.decode(errors="replace").strip())
    try:
        yield target, "read-only file system"
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


@pytest.mark.parametrize("sub", ["", "sub"])
def test_a_log_dir_that_cannot_be_written_stops_startup_with_one_line(read_only_dir: tuple[Path, str],
                                                                       sub: str) -> None:
    read_only, reason = read_only_dir
    target = read_only / sub if sub else read_only
    done = BrokerProcess(target).run_to_exit()
    assert done.returncode == 1, done
    line = _one_line(done.stderr)
    assert line.startswith("kcoord: log.dirs: ") and str(target) in line and reason in line.lower(), line
    assert list(read_only.iterdir()) == []
