"""The data dir lock: one holder across processes, refused again within a process, gone with its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from storage.dir_lock import LOCK_FILE, DataDirError, acquire, open_data_dir

ROOT = Path(__file__).resolve().parents[3]

# Another process tries the lock and says what happened; with "hold" it keeps the lock until killed.
_TRY = """
import sys, time
from pathlib import Path
from storage.dir_lock import DataDirError, acquire
try:
    lock = acquire(Path(sys.argv[1]))
except DataDirError as exc:
    print("refused:", exc, flush=True)
    sys.exit(3)
print("locked", flush=True)
if sys.argv[2:] == ["hold"]:
    time.sleep(600)
"""


def _other_process(directory: Path, *, hold: bool = False) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", _TRY, str(directory)] + (["hold"] if hold else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _try_elsewhere(directory: Path) -> tuple[int, str]:
    proc = _other_process(directory)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, out.strip()


def test_a_second_process_is_refused_while_the_lock_is_held(tmp_path: Path) -> None:
    with acquire(tmp_path) as lock:
        assert lock.held and (tmp_path / LOCK_FILE).is_file()
        code, out = _try_elsewhere(tmp_path)
        assert code == 3
        assert out.startswith("refused:") and str(tmp_path) in out and LOCK_FILE in out
    code, out = _try_elsewhere(tmp_path)
    assert (code, out) == (0, "locked")


def test_this_process_is_refused_too_and_keeps_its_lock(tmp_path: Path) -> None:
    lock = acquire(tmp_path)
    try:
        with pytest.raises(DataDirError, match=r"\.lock .*already holds it"):
            acquire(tmp_path)
        # The refusal must not have opened and closed the file: that would have dropped the lock.
        code, _ = _try_elsewhere(tmp_path)
        assert code == 3
    finally:
        lock.release()
    acquire(tmp_path).release()


def test_release_is_idempotent_and_leaves_the_file_untouched(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_bytes(b"left by someone")
    lock = acquire(tmp_path)
    lock.release()
    lock.release()
    assert not lock.held
    assert (tmp_path / LOCK_FILE).read_bytes() == b"left by someone"


def test_a_killed_holder_leaves_a_file_but_no_lock(tmp_path: Path) -> None:
    holder = _other_process(tmp_path, hold=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirError, match="another process"):
            acquire(tmp_path)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
    assert (tmp_path / LOCK_FILE).exists()
    acquire(tmp_path).release()


def test_open_data_dir_creates_missing_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "data"
    with open_data_dir(target) as lock:
        assert target.is_dir() and lock.path == target / LOCK_FILE


def test_open_data_dir_refuses_a_file(tmp_path: Path) -> None:
    f = tmp_path / "plain"
    f.write_text("x")
    with pytest.raises(DataDirError, match=f"{f} is a file, not a directory"):
        open_data_dir(f)
    assert f.read_text() == "x"


def test_open_data_dir_refuses_a_path_under_a_file(tmp_path: Path) -> None:
    f = tmp_path / "plain"
    f.write_text("x")
    with pytest.raises(DataDirError, match=f"cannot create {f}/sub/data: {f} is a file, not a directory"):
        open_data_dir(f / "sub" / "data")


@pytest.mark.skipif(os.geteuid() == 0, reason="root bypasses permission bits; as root the integration test "
                                               "uses a read-only file system instead")
def test_open_data_dir_refuses_a_directory_it_cannot_write(tmp_path: Path) -> None:
    target = tmp_path / "ro"
    target.mkdir(mode=0o555)
    try:
        with pytest.raises(DataDirError, match="permission denied"):
            open_data_dir(target)
        assert not (target / LOCK_FILE).exists()
    finally:
        target.chmod(0o755)
