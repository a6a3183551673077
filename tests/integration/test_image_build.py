"""The broker image builds from the Dockerfile on a locally made Debian base, starts as its
entrypoint says, answers Kafka's ApiVersions, and runs `kcoord serve --nodes 2` with the etcd it
ships (deploy/build-image.sh does the work)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_image_builds_starts_and_answers_api_versions(tmp_path: Path) -> None:
    for needed in ("buildah", "mmdebstrap"):
        if shutil.which(needed) is None:
            pytest.skip(f"{needed} is not installed")
    if os.geteuid() != 0:
        pytest.skip("building a root filesystem and running chroot isolation need root")

    env = {**os.environ, "TMPDIR": str(tmp_path), "KCOORD_BUILD_TIMEOUT": "240"}
    result = subprocess.run(["bash", str(ROOT / "deploy" / "build-image.sh")], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=280, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "skipped:" not in output
    assert "ApiVersions v0 answered" in output
    assert "ok: image builds" in output
    # Everything the build made (root filesystem, container store, mounts) is gone again.
    assert list(tmp_path.iterdir()) == []
    assert str(tmp_path) not in Path("/proc/self/mounts").read_text()
