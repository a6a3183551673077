"""Small documents that change rarely (SCRAM credentials, ACLs) kept as one JSON file in the data
dir, replaced atomically and made durable (write temp, fsync, rename, fsync dir) before the change
is acknowledged."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_durably(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read(path: Path) -> Any:
    if not path.exists():
        return None
    return json.loads(path.read_text())
