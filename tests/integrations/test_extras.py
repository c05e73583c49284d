"""Each integration imported without its peer library installed says which extra to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("peer", "name"),
    [("celery", "Celery"), ("rq", "RQ"), ("dramatiq", "Dramatiq"), ("django", "Django")],
)
def test_an_integration_without_its_peer_names_the_pip_install(
    tmp_path: Path, peer: str, name: str
) -> None:
    # the peer is made unimportable, as when the extra is not installed
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nsys.modules[{peer!r}] = None\n")
    done = subprocess.run(
        [sys.executable, "-c", f"import fairq.integrations.{peer}"],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
    )  # fmt: skip
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"ImportError: fairq.integrations.{peer} needs {name}: pip install 'fairq[{peer}]'"
    )
