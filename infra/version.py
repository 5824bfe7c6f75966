"""The project's version, and the code version that manifests record.

``pyproject.toml``'s ``version`` is the one source. In a checkout that file is
read directly (an editable install's metadata keeps the version it was
installed with); elsewhere the installed package's metadata is used.

:func:`code_version` adds the git commit when the code runs from a git
checkout, as a PEP 440 local version: ``0.13.0+g1a2b3c4``, and
``0.13.0+g1a2b3c4.dirty`` when tracked files have uncommitted changes. From a
plain install, without a ``git`` program, or when git fails, it is the version
alone. Git runs at most once per process (two short commands, each bounded by
a timeout); the result is cached. Only the standard library is imported.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

PACKAGE = "structcse"
SOURCE_ROOT = Path(__file__).resolve().parent.parent  # the checkout's root when run from one (infra/..)
GIT_TIMEOUT_S = 5.0
GIT_REPO_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


def _pyproject_version(root: Path) -> str | None:
    """``version`` of ``root/pyproject.toml`` when that file is this project's, else None."""
    path = root / "pyproject.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # Python 3.10: the two [project] lines this needs
        name = re.search(r'^name\s*=\s*"([^"]+)"', text, re.MULTILINE)
        version = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
        project = {"name": name and name.group(1), "version": version and version.group(1)}
    else:
        try:
            project = tomllib.loads(text).get("project", {})
        except tomllib.TOMLDecodeError:
            return None
    return project.get("version") if project.get("name") == PACKAGE else None


def package_version(root: Path = SOURCE_ROOT) -> str:
    """The project's version: ``root``'s pyproject.toml in a checkout, else the installed metadata, else
    ``"unknown"``."""
    found = _pyproject_version(root)
    if found:
        return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def _git(root: Path, *args: str) -> str | None:
    """stdout of ``git -C root ARGS``, or None when git is missing, fails or takes too long."""
    git = shutil.which("git")
    if git is None:
        return None
    # a git hook's GIT_DIR / GIT_INDEX_FILE would point git at another repository or index than root's
    env = {k: v for k, v in os.environ.items() if k not in GIT_REPO_VARIABLES}
    try:
        done = subprocess.run([git, "-C", str(root), "--no-optional-locks", *args], check=False, capture_output=True,
                              text=True, timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(root: Path = SOURCE_ROOT) -> tuple[str, bool] | None:
    """(short commit, uncommitted changes to tracked files) when ``root`` is the top of a git checkout, else None
    (a folder inside some other repository, e.g. a virtual environment in a user's project, is not one)."""
    out = _git(root, "rev-parse", "--show-toplevel", "--short=7", "HEAD")
    if out is None:
        return None
    lines = out.split()
    if len(lines) != 2 or not re.fullmatch(r"[0-9a-f]{7,40}", lines[1]):
        return None
    try:
        if Path(lines[0]).resolve() != root.resolve():
            return None
    except OSError:
        return None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return lines[1], bool(status and status.strip())


def describe(root: Path = SOURCE_ROOT) -> str:
    """``VERSION+gCOMMIT[.dirty]`` for a checkout at ``root``, else ``VERSION`` (uncached: see code_version)."""
    version = package_version(root)
    state = git_state(root)
    if state is None:
        return version
    commit, dirty = state
    return f"{version}+g{commit}{'.dirty' if dirty else ''}"


@functools.cache
def code_version() -> str:
    """The code version manifests record (``0.13.0+g1a2b3c4``, or ``0.13.0`` outside a checkout); once per
    process."""
    return describe(SOURCE_ROOT)


def version_line() -> str:
    """What ``structcse --version`` prints: ``structcse 0.13.0 (git 1a2b3c4)``, ``, modified`` when the checkout
    has uncommitted changes."""
    state = git_state(SOURCE_ROOT)
    line = f"{PACKAGE} {__version__}"
    if state is not None:
        line += f" (git {state[0]}{', modified' if state[1] else ''})"
    return line


__version__ = package_version()
