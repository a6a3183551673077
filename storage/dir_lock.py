"""One broker per data dir: the ``.lock`` file Kafka keeps in each log dir, locked while the broker runs.

Kafka locks ``<log dir>/.lock`` with the JVM's ``FileChannel.tryLock``, which on Unix is an ``fcntl``
write lock over the whole file. ``fcntl.lockf`` takes that same kind of lock, so a kcoord broker and a
Kafka broker pointed at one directory keep each other out, and two kcoord brokers do too. The kernel
drops the lock when its process dies, however it dies: a ``.lock`` file left behind by a killed broker
is only a file and does not keep the next broker from starting.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType

from storage.errors import StorageError

LOCK_FILE = ".lock"


class DataDirError(StorageError):
    """The data dir cannot be used: not a directory, not accessible, or locked by another broker."""


# fcntl locks belong to the process, not to the descriptor: a second lockf on the same file from this
# process succeeds, and closing *any* descriptor of the file drops the lock. So the process remembers
# the lock files it holds (by device and inode, which symlinked paths share) and refuses to open one of
# them again rather than silently sharing or losing the lock.
_HELD: set[tuple[int, int]] = set()
_HELD_GUARD = threading.Lock()


def _in_use(directory: str, name: str = LOCK_FILE) -> str:
    return (f"failed to acquire lock on file {name} in {directory}: a kcoord or Kafka broker in another "
            "process is using this directory")


class DirLock:
    """An exclusive lock on ``<directory>/.lock``, held until :meth:`release` or the process ends."""

    def __init__(self, directory: Path, fd: int, key: tuple[int, int], name: str = LOCK_FILE) -> None:
        self.directory = directory
        self.name = name
        self._fd: int | None = fd
        self._key = key

    @property
    def path(self) -> Path:
        return self.directory / self.name

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlocks and closes; the file stays (see :func:`acquire` for why it is never deleted)."""
        with _HELD_GUARD:
            if self._fd is None:
                return
            fd, self._fd = self._fd, None
            _HELD.discard(self._key)
        try:
            fcntl.lockf(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> DirLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def acquire(directory: Path, *, shared: bool = False, name: str = LOCK_FILE) -> DirLock:
    """Locks ``<directory>/.lock`` without waiting, creating the file if needed; the directory must exist.

    The file is opened without truncation and nothing is written to it, so a broker that loses the race
    changes nothing in a directory another broker owns. Unlike Kafka, the file is not deleted on release:
    a process that opened the old file just before the deletion could lock it while a third one creates
    and locks a new file, and then two brokers would both hold "the" lock.

    ``shared``: a read lock, which other shared holders (the nodes of a cluster on one shared
    directory) may hold too, but which keeps out an exclusive holder (a single-node broker or
    Kafka), and is kept out by one. ``name`` is the lock file's name.
    """
    shown = os.path.abspath(directory)
    path = Path(directory) / name
    with _HELD_GUARD:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise DataDirError(f"cannot use {os.path.abspath(path)}: {exc.strerror}") from None
        else:
            if (st.st_dev, st.st_ino) in _HELD:
                raise DataDirError(f"failed to acquire lock on file {LOCK_FILE} in {shown}: this process already "
                                   "holds it")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise DataDirError(f"cannot open {os.path.abspath(path)}: {exc.strerror}") from None
        try:
            fcntl.lockf(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise DataDirError(_in_use(shown, name)) from None
            raise DataDirError(f"cannot lock {os.path.abspath(path)}: {exc.strerror}") from None
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        _HELD.add(key)
    return DirLock(Path(directory), fd, key, name)


def _first_non_directory(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a directory (why ``path`` cannot be made)."""
    for parent in reversed(path.parents):
        try:
            if parent.exists() and not parent.is_dir():
                return parent
        except OSError:
            return None
    return None


def open_data_dir(directory: Path, *, shared: bool = False) -> DirLock:
    """Creates ``directory`` if missing, checks that it is a usable directory, then locks it.

    Everything is checked before anything inside the directory is read or written, and each refusal is
    one sentence naming the path, because these are the mistakes an operator makes in a config file.
    """
    shown = Path(os.path.abspath(directory))
    try:
        if shown.exists() and not shown.is_dir():
            raise DataDirError(f"{shown} is a file, not a directory")
        shown.mkdir(parents=True, exist_ok=True)
    except DataDirError:
        raise
    except FileExistsError:
        # A file (or a dangling symlink) took the name between the check and mkdir.
        raise DataDirError(f"{shown} exists and is not a directory") from None
    except NotADirectoryError:
        blocker = _first_non_directory(shown)
        where = f"{blocker} is a file, not a directory" if blocker else "a parent is not a directory"
        raise DataDirError(f"cannot create {shown}: {where}") from None
    except OSError as exc:
        raise DataDirError(f"cannot create {shown}: {exc.strerror}") from None
    # The broker lists, reads and writes here; say so now rather than fail on the first partition.
    if not os.access(shown, os.R_OK | os.W_OK | os.X_OK):
        if os.statvfs(shown).f_flag & os.ST_RDONLY:
            raise DataDirError(f"{shown} is on a read-only file system")
        raise DataDirError(f"{shown}: permission denied (the broker needs to read, write and enter it)")
    return acquire(shown, shared=shared)
