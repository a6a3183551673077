"""syncfs(2): every file of one filesystem made durable by one system call.

A group-commit pass that made ``n`` partition logs dirty would otherwise fdatasync them one by one,
and on CPython each of those calls (and the open and close of the descriptor it syncs through)
gives the interpreter lock up and takes it back: with the event loop busy, every such hand-off
makes the loop wait for the sync thread's turn. One syncfs covers the data, the indexes and the
directory entries of every log on the filesystem, in one hand-off.

Linux only, and only from 5.8, the first kernel whose syncfs reports a write-back error of any
file of the filesystem that happened since the descriptor was opened (before, it returned 0 even
when data was lost, which would acknowledge writes that are not on the disk), and only on local
filesystems whose syncfs is known to write back every dirty file and commit their journal before it
returns (``LOCAL_FILESYSTEMS``): a network filesystem (NFS, where durability is the COMMIT that
fsync sends) or one this module does not know keeps its logs synced one by one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
from collections.abc import Callable

_FIRST_KERNEL_REPORTING_ERRORS = (5, 8)
LOCAL_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs", "overlay"})
MOUNTINFO = "/proc/self/mountinfo"
_RELEASE = re.compile(r"(\d+)\.(\d+)")


def kernel_release(release: str) -> tuple[int, int]:
    """(major, minor) of a ``uname -r`` string such as ``6.1.0-18-amd64``; (0, 0) if unreadable."""
    found = _RELEASE.match(release)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def _load() -> Callable[[int], int] | None:
    if sys.platform != "linux" or kernel_release(os.uname().release) < _FIRST_KERNEL_REPORTING_ERRORS:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    # A ctypes foreign call releases the interpreter lock for its duration, as os.fdatasync does.
    call: Callable[[int], int] = function
    return call


_SYNCFS = _load()


def available() -> bool:
    return _SYNCFS is not None


def filesystem_type(fd: int, mountinfo: str = MOUNTINFO) -> str | None:
    """The type of the filesystem ``fd`` is on (``ext4``), matched by device number in
    ``/proc/self/mountinfo``; None when no mount has it (a btrfs subvolume's own device, say)."""
    dev = os.fstat(fd).st_dev
    key = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields = line.split()
                if len(fields) > 2 and fields[2] == key and " - " in line:
                    return line.split(" - ", 1)[1].split()[0]
    except OSError:
        return None
    return None


def suited(fd: int) -> bool:
    """syncfs is available and makes the files of ``fd``'s filesystem durable (see above)."""
    return available() and filesystem_type(fd) in LOCAL_FILESYSTEMS


def syncfs(fd: int) -> None:
    """Makes every file of the filesystem ``fd`` is on durable; raises ``OSError`` if the kernel
    reports that one of them could not be written (the caller cannot tell which)."""
    if _SYNCFS is None:
        raise OSError("syncfs is not available on this system")
    if _SYNCFS(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
