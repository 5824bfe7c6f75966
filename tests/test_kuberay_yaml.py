"""kuberay.yaml + Dockerfile: a RayCluster with token auth, every pod able to write S3, TRAIN_DRIVER on
on-demand pods only, the GPUs the training workers ask for, and an image that installs the project with
its pyproject.toml dependencies. Plain parsing (yaml.safe_load_all), no Kubernetes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.test_cluster_yaml import HAND_KEPT_LISTS, NO_DEPS, _pip_installs, _targets

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def manifests() -> dict:
    docs = [d for d in yaml.safe_load_all((REPO / "kuberay.yaml").read_text()) if d]
    return {d["kind"]: d for d in docs}


def _groups(cluster: dict) -> dict[str, dict]:
    spec = cluster["spec"]
    return {"head": spec["headGroupSpec"], **{g["groupName"]: g for g in spec["workerGroupSpecs"]}}


def _resources(group: dict) -> dict:
    raw = group.get("rayStartParams", {}).get("resources")
    return json.loads(json.loads(raw)) if raw else {}  # KubeRay's doubly quoted JSON


def test_ray_version_and_token_auth(manifests):
    import ray

    cluster = manifests["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1"
    assert cluster["spec"]["rayVersion"] == ray.__version__  # the version pyproject.toml installs
    assert cluster["spec"]["authOptions"]["mode"] == "token"
    for group in _groups(cluster).values():
        for container in group["template"]["spec"]["containers"]:
            # KubeRay sets the token from its Secret; a literal one here would be a committed secret
            assert not any(e.get("name") == "RAY_AUTH_TOKEN" and "value" in e for e in container.get("env", []))


def test_every_pod_runs_as_the_service_account_that_may_write_s3(manifests):
    account = manifests["ServiceAccount"]
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    for name, group in _groups(manifests["RayCluster"]).items():
        assert group["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"], name


def test_train_driver_on_on_demand_pods_only_and_gpus_requested(manifests):
    groups = _groups(manifests["RayCluster"])
    spot = {n for n, g in groups.items()
            if (g["template"]["spec"].get("nodeSelector") or {}).get("eks.amazonaws.com/capacityType") == "SPOT"}
    with_driver = {n for n, g in groups.items() if "TRAIN_DRIVER" in _resources(g)}
    assert spot and "head" in with_driver and not with_driver & spot
    assert all(_resources(groups[n])["TRAIN_DRIVER"] >= 1 for n in with_driver)
    assert groups["head"]["rayStartParams"]["num-cpus"] == "0"
    for name in spot:  # the training workers: GPUs requested and limited alike
        container = groups[name]["template"]["spec"]["containers"][0]
        assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
        assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"]["nvidia.com/gpu"]


def test_every_pod_runs_the_dockerfiles_image_which_installs_the_project_with_its_dependencies(manifests):
    images = {c["image"] for g in _groups(manifests["RayCluster"]).values() for c in g["template"]["spec"]["containers"]}
    assert len(images) == 1 and images.pop().endswith(":2.60.0")
    dockerfile = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    assert re.search(r"^FROM rayproject/ray:2\.60\.0-py311-gpu$", dockerfile, re.MULTILINE)
    runs = [line[4:] for line in dockerfile.splitlines() if line.startswith("RUN ")]
    installs = _pip_installs(runs)
    targets = [t for args in installs for t in _targets(args)[0]]
    assert "torch==2.13.0" in targets and any(t.startswith("/home/ray/structcse[") for t in targets)
    for args in installs:
        assert not _targets(args)[1] & (NO_DEPS | HAND_KEPT_LISTS), args
    assert "_structcse_wikitext" in dockerfile  # the C loops built
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {"demo_out/", "runs/", "sets/", ".git/", "dumps/", "data/", "hub/"} <= set(ignored)
    # Ray's job upload (--working-dir .) and the cluster's rsync (rsync_filter) leave out what .gitignore lists:
    # the dumps, data and hub copies a user keeps in the clone are never shipped to the cluster
    kept_out = (REPO / ".gitignore").read_text().split()
    assert {"/dumps/", "/data/", "/hub/", "/sets/", "/runs/", "/demo_out/"} <= set(kept_out)
