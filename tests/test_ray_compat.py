"""Ray's internals go through infra/ray_compat.py only: each one is in the installed Ray, a missing one
is named in a clear error, and no other module of the project reaches for one."""

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("train", "tune", "eval", "ingest", "infra", "structcse", "score")
INTERNAL_NAMES = re.compile(r"ray\._private|\._internal|TUNE_DISABLE_STRICT_METRIC_CHECKING")


def test_every_ray_internal_the_project_uses_is_in_the_installed_ray():
    import ray

    from infra.ray_compat import INTERNALS, RayInternalMissing, internal

    missing = []
    for entry in INTERNALS:
        try:
            internal(entry.key)
        except RayInternalMissing as e:
            missing.append(f"{entry.name} ({entry.feature}): {e}")
    assert not missing, f"Ray {ray.__version__} lacks {len(missing)} internal(s):\n" + "\n".join(missing)


def test_the_installed_ray_is_the_pinned_tested_version():
    import ray
    from packaging.specifiers import SpecifierSet

    from infra.ray_compat import TESTED_RAY

    pin = re.search(r'"ray\[[^\]]*\]([^"]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    assert SpecifierSet(pin) == SpecifierSet(TESTED_RAY), f"pyproject.toml pins ray{pin}, ray_compat says {TESTED_RAY}"
    assert ray.__version__ in SpecifierSet(TESTED_RAY), f"Ray {ray.__version__} is not the tested ray{TESTED_RAY}"


def test_a_missing_internal_is_named_with_the_tested_versions_and_the_feature(monkeypatch):
    import infra.ray_compat as ray_compat

    def renamed(key, **change):
        return tuple(dataclasses.replace(i, **change) if i.key == key else i for i in ray_compat.INTERNALS)

    monkeypatch.setattr(ray_compat, "INTERNALS", renamed("gcs_addresses", attribute="find_gcs_addresses_renamed"))
    with pytest.raises(ray_compat.RayInternalMissing) as caught:
        ray_compat.find_gcs_addresses()
    message = str(caught.value)
    assert isinstance(caught.value, RuntimeError)
    assert "ray._private.services.find_gcs_addresses_renamed" in message
    assert ray_compat.TESTED_RAY in message and "other Ray instances" in message and "\n" not in message

    monkeypatch.setattr(ray_compat, "INTERNALS", renamed("strict_metric_checking", env_var="TUNE_NO_SUCH_SWITCH"))
    with pytest.raises(ray_compat.RayInternalMissing, match="TUNE_NO_SUCH_SWITCH"):
        with ray_compat.tune_metric_checking_off():
            pass

    monkeypatch.setattr(ray_compat, "INTERNALS", renamed("train_session", module="ray.train._no_such_module"))
    with pytest.raises(ray_compat.RayInternalMissing, match=r"ray\.train\._no_such_module\.get_session"):
        ray_compat.tune_trial_report_queue()


def test_tune_metric_checking_is_off_only_inside_the_block(monkeypatch):
    import os

    from infra.ray_compat import tune_metric_checking_off

    monkeypatch.delenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", raising=False)
    with tune_metric_checking_off():
        assert os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] == "1"
    assert "TUNE_DISABLE_STRICT_METRIC_CHECKING" not in os.environ


def test_importing_ray_compat_does_not_import_ray():
    out = subprocess.run([sys.executable, "-c", "import sys, infra.ray_compat; print('ray' in sys.modules)"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_no_other_module_names_a_ray_internal():
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path == REPO / "infra" / "ray_compat.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if INTERNAL_NAMES.search(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "Ray internals outside infra/ray_compat.py (add a function there):\n" + "\n".join(found)
