"""The documentation site (mkdocs.yml over docs/) builds, and a broken link or anchor fails it.

``mkdocs build --strict`` with every link check of mkdocs.yml's ``validation`` set to warn: a
link to a page that is not there, an anchor no heading makes, a page left out of the nav, each
stops the build. The README is not part of the site: its links are checked here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=config.parent,
    )


def test_the_site_builds_with_every_link_and_anchor_resolved(tmp_path: Path) -> None:
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "fairq.App" in api and "Jobs declared against one store" in api  # from docstrings


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    index = tmp_path / "docs" / "index.md"
    index.write_text(
        index.read_text() + "\n[gone](no-such-page.md) and [lost](tutorial.md#no-such-step)\n"
    )
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr and "#no-such-step" in done.stderr


def test_the_readme_links_into_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert "docs/index.md" in local
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing
