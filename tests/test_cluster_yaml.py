"""cluster.yaml: its nodes install the project from pyproject.toml with its dependencies (one list), and
the TRAIN_DRIVER resource that pins trial and search drivers lives on on-demand node types only.
Plain parsing (yaml.safe_load), no Ray. Token auth on every node: tests/test_security.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[1]
PIP_OPTIONS_WITH_VALUE = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--progress-bar",
                          "--target", "-t", "--prefix", "--root", "--cache-dir", "--timeout", "--retries"}
HAND_KEPT_LISTS = {"-r", "--requirement", "-c", "--constraint"}
NO_DEPS = {"--no-deps", "--no-dependencies"}


@pytest.fixture(scope="module")
def cluster() -> dict:
    return yaml.safe_load((REPO / "cluster.yaml").read_text())


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _setup_commands(cluster: dict) -> list[str]:
    commands = list(cluster.get("setup_commands") or [])
    commands += cluster.get("head_setup_commands") or []
    commands += cluster.get("worker_setup_commands") or []
    for node_type in cluster["available_node_types"].values():
        commands += node_type.get("worker_setup_commands") or []
    return commands


def _pip_installs(commands: list[str]) -> list[list[str]]:
    """The arguments after ``pip install`` of every pip install in the commands (through ``&&``, ``;``,
    ``||`` and parentheses; ``python -m pip``, ``pip3`` and ``uv pip`` count)."""
    installs = []
    for command in commands:
        for part in re.split(r"&&|\|\||;|\(|\)", command):
            words = shlex.split(part)
            for i, word in enumerate(words[:-1]):
                if re.fullmatch(r"(.*/)?pip3?(\.\d+)?", word) and words[i + 1] == "install":
                    installs.append(words[i + 2:])
                    break
    return installs


def _targets(args: list[str]) -> tuple[list[str], set[str]]:
    """(what an install names, its options)."""
    targets, options, skip = [], set(), False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            options.add(name)
            skip = name in PIP_OPTIONS_WITH_VALUE | HAND_KEPT_LISTS and "=" not in arg
            continue
        targets.append(arg)
    return targets, options


def _project_dirs(cluster: dict) -> set[str]:
    """Where the nodes hold this repository: file_mounts destinations whose source is the repo itself."""
    dirs = {dst.rstrip("/") for dst, src in cluster.get("file_mounts", {}).items()
            if (REPO / Path(src).expanduser()).resolve() == REPO}
    assert dirs, "cluster.yaml mounts the project on its nodes (file_mounts: {~/structcse: .})"
    return dirs


def _project_install(target: str, project_dirs: set[str], project: dict) -> bool:
    """``~/structcse`` (or ``~/structcse[extra]``, an extra pyproject.toml defines)."""
    path, _, extras = target.partition("[")
    if path.rstrip("/") not in project_dirs:
        return False
    for extra in filter(None, (e.strip() for e in extras.rstrip("]").split(","))):
        assert extra in project.get("optional-dependencies", {}), f"{target}: no extra {extra!r} in pyproject.toml"
    return True


def _dependencies(project: dict) -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, project["dependencies"])}


def test_setup_installs_the_project_with_its_dependencies(cluster, project):
    commands = _setup_commands(cluster)
    installs = _pip_installs(commands)
    written = sum(len(re.findall(r"\bpip3?(?:\.\d+)? install\b", c)) for c in commands)
    assert written and len(installs) == written, f"{written} pip installs in the setup commands, {len(installs)} read"
    project_dirs = _project_dirs(cluster)
    project_installs = 0
    for args in installs:
        targets, options = _targets(args)
        assert not options & NO_DEPS, f"pip install {' '.join(args)}: dependencies come from pyproject.toml"
        assert not options & HAND_KEPT_LISTS, f"pip install {' '.join(args)}: a second list of dependencies"
        project_installs += sum(_project_install(t, project_dirs, project) for t in targets)
    assert project_installs >= 1, f"no pip install of the project ({sorted(project_dirs)}) in {installs}"


def test_setup_installs_nothing_beyond_torch_and_pyproject_dependencies(cluster, project):
    """Every package named besides the project is torch or one of pyproject.toml's dependencies, at a
    version that list allows (a pin there is a pin of that dependency, not a new one)."""
    dependencies = _dependencies(project)
    project_dirs = _project_dirs(cluster)
    named = []
    for args in _pip_installs(_setup_commands(cluster)):
        for target in _targets(args)[0]:
            if _project_install(target, project_dirs, project):
                continue
            requirement = Requirement(target)
            name = canonicalize_name(requirement.name)
            assert name in dependencies, (f"cluster.yaml installs {target!r}, which is not in pyproject.toml's "
                                          f"dependencies: add it there (or to an extra) instead")
            pins = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
            for version in pins:
                assert dependencies[name].specifier.contains(version, prereleases=True), (
                    f"cluster.yaml pins {target!r}; pyproject.toml asks {dependencies[name]}")
            named.append(name)
    assert "torch" in named and set(named) <= {"torch"} | set(dependencies)


def test_torch_is_pinned_when_installed_apart(cluster):
    """The one package installed on its own is torch, pinned (the CUDA wheel must match the image)."""
    torch = [target for args in _pip_installs(_setup_commands(cluster)) for target in _targets(args)[0]
             if re.match(r"torch\b", target) and not target.startswith(("torchvision", "torchaudio"))]
    assert torch, "cluster.yaml installs torch apart (its CUDA build)"
    for target in torch:
        assert any(s.operator == "==" for s in Requirement(target).specifier), target


def _spot(node_config: dict) -> bool:
    """A node type whose instances the cloud can take back (AWS spot, GCP preemptible/spot, Azure spot)."""
    market = (node_config.get("InstanceMarketOptions") or {}).get("MarketType", "")
    scheduling = node_config.get("scheduling") or {}
    if isinstance(scheduling, list):  # GCP's legacy list form
        scheduling = {k: v for item in scheduling for k, v in item.items()}
    return (str(market).lower() == "spot" or bool(scheduling.get("preemptible"))
            or str(scheduling.get("provisioningModel", "")).upper() == "SPOT"
            or str(node_config.get("priority", "")).lower() == "spot")


def test_train_driver_resource_is_on_on_demand_node_types_only(cluster):
    types = cluster["available_node_types"]
    with_driver = {name for name, t in types.items() if "TRAIN_DRIVER" in (t.get("resources") or {})}
    spot = {name for name, t in types.items() if _spot(t.get("node_config") or {})}
    assert with_driver, "a node type offers TRAIN_DRIVER (trial drivers request {'TRAIN_DRIVER': 0.01})"
    assert spot, "the GPU workers are spot (this test would prove nothing otherwise)"
    assert not with_driver & spot, f"TRAIN_DRIVER on spot node type(s) {sorted(with_driver & spot)}"
    head = cluster["head_node_type"]
    assert head not in spot
    # the search looks for TRAIN_DRIVER in ray.cluster_resources() when it starts: the one node
    # type always up then is the head (worker types scale from min_workers 0)
    assert head in with_driver, "the head offers TRAIN_DRIVER"
    for name in with_driver:
        assert types[name]["resources"]["TRAIN_DRIVER"] >= 1, name  # room for 100 drivers at 0.01 each


def test_every_worker_node_type_can_write_to_s3(cluster):
    """Ray attaches its default instance profile to the head only; a worker without one cannot write the
    sets and checkpoints the cluster is told to keep in S3 (issue 22)."""
    assert cluster["provider"]["type"] == "aws"
    text = (REPO / "cluster.yaml").read_text()
    assert "s3://" in text  # what the nodes are told to write to
    head = cluster["head_node_type"]
    for name, node_type in cluster["available_node_types"].items():
        if name == head:
            continue
        profile = node_type["node_config"].get("IamInstanceProfile")
        assert isinstance(profile, dict) and (profile.get("Name") or profile.get("Arn")), name
