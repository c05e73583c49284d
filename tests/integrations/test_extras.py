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


@pytest.mark.parametrize(
    ("hidden", "extra"), [("pika", "fairq[dramatiq]"), ("kombu", "fairq[celery]")]
)
def test_a_relay_source_that_needs_a_missing_library_names_the_pip_install(
    tmp_path: Path, hidden: str, extra: str
) -> None:
    """A tasks module whose broker needs a library that is not installed (pika for Dramatiq's
    RabbitmqBroker, kombu for Celery): ``fairq relay`` says so in one line, with the fix."""
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nsys.modules[{hidden!r}] = None\n")
    broker = "amqp://guest:guest@127.0.0.1:5672/"
    module = "tasks_rabbit"
    if hidden == "pika":
        body = (
            "from dramatiq.brokers.rabbitmq import RabbitmqBroker\n"
            "from fairq.integrations.dramatiq import FairDramatiq\n"
            f"fair = FairDramatiq(RabbitmqBroker(url={broker!r}), url='memory://')\n"
        )
    else:
        body = (
            "from celery import Celery\n"
            "from fairq.integrations.celery import FairCelery\n"
            f"fair = FairCelery(Celery('t', broker={broker!r}), url='memory://')\n"
        )
    (tmp_path / f"{module}.py").write_text(body)
    done = subprocess.run(
        [sys.executable, "-m", "fairq", "relay", f"{module}:fair"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(
        f"module {module!r} needs {hidden!r}, which is not installed: pip install '{extra}'"
    ), done.stderr
