"""One version source (pyproject.toml) and what carries it: ``structcse --version``, manifests' ``code_version``
(the git commit in a checkout, the version alone elsewhere), the SPARQL user agent, CHANGELOG.md's newest
release and CITATION.cff; the licence named in pyproject.toml and shipped as LICENSE."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra import version

ROOT = Path(__file__).resolve().parent.parent
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION = PYPROJECT["version"]
GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="no git program")


def test_the_version_is_pyproject_s_and_pep_440():
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", VERSION), VERSION
    assert version.__version__ == version.package_version(ROOT) == VERSION


def test_structcse_version_prints_the_version_and_the_commit_of_a_checkout():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "structcse.cli", "--version"], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    match = re.fullmatch(rf"structcse {re.escape(VERSION)}( \(git ([0-9a-f]{{7,40}})(, modified)?\))?", line)
    assert match, line
    state = version.git_state(ROOT)
    assert (match.group(2) is not None) == (state is not None), (line, state)
    if state is not None:
        assert match.group(2) == state[0]


def test_manifests_code_version_is_the_version_and_this_checkout_s_commit():
    from setformat.io import code_version

    value = code_version()
    assert value == version.code_version()  # one lookup per process
    state = version.git_state(ROOT)
    expected = VERSION if state is None else f"{VERSION}+g{state[0]}"
    assert value.removesuffix(".dirty") == expected  # the suffix follows the tree, which may change while tests run
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\+g[0-9a-f]{7,40}(\.dirty)?)?", value), value


def _project(folder: Path, version: str = "9.8.7") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(f'[project]\nname = "structcse"\nversion = "{version}"\n', encoding="utf-8")
    return folder


def _git(folder: Path, *args: str) -> str:
    return subprocess.run([GIT, "-C", str(folder), "-c", "user.name=test", "-c", "user.email=test@example.invalid",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


def test_outside_a_checkout_the_code_version_is_the_version_alone(tmp_path):
    assert version.describe(_project(tmp_path / "plain")) == "9.8.7"
    assert version.git_state(tmp_path / "plain") is None
    # another project's pyproject.toml is not this one's version
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "1.2.3"\n')
    assert version._pyproject_version(tmp_path / "other") is None


@needs_git
def test_a_checkout_s_code_version_carries_its_commit_and_uncommitted_changes(tmp_path):
    repo = _project(tmp_path / "repo")
    _git(repo, "init", "-q")
    _git(repo, "add", "pyproject.toml")
    _git(repo, "commit", "-q", "-m", "first")
    commit = _git(repo, "rev-parse", "HEAD")
    clean = version.describe(repo)
    assert re.fullmatch(r"9\.8\.7\+g[0-9a-f]{7,40}", clean) and commit.startswith(clean.split("+g")[1]), clean
    (repo / "notes.txt").write_text("untracked files leave the tree clean")
    assert version.describe(repo) == clean
    _project(repo, "9.8.8")  # a tracked file changed, not committed
    assert version.describe(repo) == clean.replace("9.8.7", "9.8.8") + ".dirty"
    # a folder inside a checkout is not the top of one: the version alone (a venv inside a user's repository)
    assert version.describe(_project(repo / "nested")) == "9.8.7"


@needs_git
def test_without_a_git_program_the_code_version_is_the_version_alone(tmp_path, monkeypatch):
    repo = _project(tmp_path / "repo")
    _git(repo, "init", "-q")
    _git(repo, "add", "pyproject.toml")
    _git(repo, "commit", "-q", "-m", "first")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert version.describe(repo) == "9.8.7"


def test_structcse_version_re_exports_it_and_a_model_card_names_it():
    import structcse
    import structcse.version
    from train.config import TrainConfig
    from train.model_card import card_section

    assert structcse.__version__ == structcse.version.__version__ == VERSION
    assert structcse.version.code_version() == version.code_version()
    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": "d"})
    assert f"- **Code:** structcse `{version.code_version()}`" in card_section(cfg, [], "latest", {"step": 1})


def test_the_sparql_user_agent_names_the_plain_version():
    from ingest.aspects.sparql import DEFAULT_USER_AGENT

    assert DEFAULT_USER_AGENT.startswith(f"structcse/{VERSION} ("), DEFAULT_USER_AGENT


def test_the_licence_is_apache_2_0_in_pyproject_and_shipped():
    assert PYPROJECT["license"] == "Apache-2.0"
    assert PYPROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert "Copyright 2026 The structcse authors" in text
    assert "docs" in PYPROJECT["optional-dependencies"] and "cloud" in PYPROJECT["optional-dependencies"]


def test_citation_cff_cites_this_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    for key in ("cff-version", "message", "title", "authors", "version", "license", "type"):
        assert cff.get(key), key
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert str(cff["version"]) == VERSION and cff["license"] == "Apache-2.0"
    assert all(a.get("name") or a.get("family-names") for a in cff["authors"])
    for ref in cff.get("references", []):
        assert ref.get("title") and ref.get("authors") and ref.get("type"), ref


def test_the_changelog_s_newest_release_is_pyproject_s_version():
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$",
                          (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert releases and releases[0][0] == VERSION, releases[:1]
    numbers = [tuple(int(p) for p in v.split(".")) for v, _ in releases]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers), numbers
    dates = [d for _, d in releases]
    assert dates == sorted(dates, reverse=True), dates
