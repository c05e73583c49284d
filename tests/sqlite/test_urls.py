"""Store URLs: the two accepted forms, and clear errors naming the path for everything else."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fairq.backends import open_backend
from fairq.backends.sqlite import SQLiteBackend
from fairq.errors import ConfigError, StoreUnavailable


def test_relative_path_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    SQLiteBackend.from_url("sqlite:///sub.db").close()
    assert (tmp_path / "sub.db").is_file()


def test_absolute_path_takes_four_slashes(tmp_path: Path) -> None:
    target = tmp_path / "abs.db"
    assert str(target).startswith("/")
    open_backend(f"sqlite:///{target}").close()
    assert target.is_file()


def test_path_is_taken_verbatim(tmp_path: Path) -> None:
    target = tmp_path / "a dir with spaces %20 and #" / "q.db"
    target.parent.mkdir()
    SQLiteBackend.from_url(f"sqlite:///{target}").close()
    assert target.is_file()


@pytest.mark.parametrize("name", ["q.db?foo=1", "q?x.db", "q.db?", "a #/q?x.db"])
def test_a_question_mark_is_a_query_no_file_name_holds(tmp_path: Path, name: str) -> None:
    """``sqlite:///fairq.db?foo=1`` is a typo'd parameter, never a file named so."""
    (tmp_path / "a #").mkdir()
    with pytest.raises(ConfigError, match="this store's URL takes no parameters"):
        SQLiteBackend.from_url(f"sqlite:///{tmp_path / name}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a #"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "names a host"),
        ("sqlite:///", "names no file"),
        ("sqlite:////", "names no file"),
        ("sqlite://host/q.db", "names a host"),
        ("sqlite:///:memory:", "memory://"),
        ("postgres:///q.db", "not a SQLite store URL"),
    ],
)
def test_malformed_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SQLiteBackend.from_url(url)


def test_a_directory_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="is a directory") as caught:
        SQLiteBackend.from_url(f"sqlite:///{tmp_path}")
    assert str(tmp_path) in str(caught.value)


def test_a_missing_directory_is_refused_by_name(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "q.db"
    with pytest.raises(StoreUnavailable, match="not an existing directory") as caught:
        SQLiteBackend.from_url(f"sqlite:///{target}")
    assert str(target) in str(caught.value)
    assert not target.parent.exists()


def test_a_path_under_a_file_is_refused_by_name(tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailable, match="plain-file"):
        SQLiteBackend.from_url(f"sqlite:///{blocker}/q.db")


def test_a_read_only_directory_is_refused_by_name(tmp_path: Path) -> None:
    """Root writes through mode bits, so as root the directory is made immutable instead
    (``chattr +i``: ext4 refuses new files in it even to root)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    as_root = os.geteuid() == 0
    lock = ["chattr", "+i", str(locked)] if as_root else ["chmod", "500", str(locked)]
    unlock = ["chattr", "-i", str(locked)] if as_root else ["chmod", "700", str(locked)]
    subprocess.run(lock, check=True)
    try:
        with pytest.raises(StoreUnavailable, match="read-only"):
            SQLiteBackend.from_url(f"sqlite:///{locked}/q.db")
        assert not (locked / "q.db").exists()
    finally:
        subprocess.run(unlock, check=True)


def test_an_unwritable_location_is_refused_by_name() -> None:
    """/proc refuses new files even to root, so this runs everywhere."""
    with pytest.raises(StoreUnavailable, match=r"/proc/fairq-test\.db"):
        SQLiteBackend.from_url("sqlite:////proc/fairq-test.db")
