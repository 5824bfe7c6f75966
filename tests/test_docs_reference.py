"""The reference pages made from the code (docs/gen_reference.py) match it: every TrainConfig key, method
option, Tune config key, environment variable the product code reads and evaluation task is on its page.
Reads the sources as text: no torch, no Ray (a second or two)."""

from __future__ import annotations

import ast
import importlib.util
import sys
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_reference_under_test", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _page(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


def test_pages_match_the_code(gen):
    stale = gen.stale()
    assert not stale, f"{', '.join(map(str, stale))} no longer match the code: run python docs/gen_reference.py"


def _dataclass_fields(rel: str, cls: str) -> list[str]:
    tree = ast.parse(_page(rel))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def test_every_train_and_tune_key_is_on_the_config_page(gen):
    page = _page("docs/reference/config.md")
    keys = [k for k in _dataclass_fields("train/config.py", "TrainConfig") if k not in gen.TRAIN_HIDDEN]
    keys += _dataclass_fields("tune/settings.py", "TuneSettings")
    missing = [k for k in keys if f"| `{k}` |" not in page]
    assert not missing, f"config keys missing from docs/reference/config.md: {missing}"
    assert len(gen.train_config_keys()) >= 40 and len(gen.tune_keys()) >= 15


def test_every_method_section_is_on_the_config_page(gen):
    page = _page("docs/reference/config.md")
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "train" / "methods").glob("*.py"))
    registered = set(re.findall(r'^@register\("(\w+)"\)', sources, re.M))
    assert registered == {m.name for m in gen.method_sections()}
    for m in gen.method_sections():
        assert f"### `{m.name}`" in page
        section = page.split(f"### `{m.name}`", 1)[1].split("\n### ", 1)[0]
        missing = [k.name for k in m.keys if f"| `{k.name}` |" not in section]
        assert not missing, f"{m.name}'s options missing from docs/reference/config.md: {missing}"


def test_every_environment_variable_read_is_on_the_environment_page(gen):
    reads = gen.env_reads()
    # the finder sees what the code reads: the variables named in the code's own docstrings and constants
    for name in ("STRUCTCSE_HUB_COPIES", "STRUCTCSE_CACHE", "STRUCTCSE_STORAGE_ATTEMPTS", "STRUCTCSE_LOG",
                 "HF_HUB_OFFLINE", "RAY_ADDRESS", "MLFLOW_TRACKING_URI", "RAY_DEDUP_LOGS", "HF_TOKEN"):
        assert name in reads, name
    structcse_names = set()
    for pkg in gen.PRODUCT_PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            structcse_names |= set(re.findall(r"[\"'](STRUCTCSE_[A-Z0-9_]+)[\"']", path.read_text(encoding="utf-8")))
    assert structcse_names <= set(reads)
    page = _page("docs/reference/environment.md")
    missing = [n for n in reads if f"| `{n}` |" not in page]
    assert not missing, f"environment variables missing from docs/reference/environment.md: {missing}"
    unused = sorted(set(gen.ENV_DOC) - set(reads))
    assert not unused, f"docs/gen_reference.py describes variables the code no longer reads: {unused}"


def test_the_finder_resolves_constants_and_loops(gen, tmp_path):
    module = tmp_path / "m.py"
    module.write_text('import os\nA_ENV = "MY_A"\nPAIR = (A_ENV, "MY_B")\nD = {"MY_C": "1"}\n'
                      'def f(var):\n    os.environ.get("MY_D"); os.getenv("MY_E"); os.environ["MY_F"]\n'
                      '    [os.environ.get(v) for v in PAIR]\n    for k, _ in D.items():\n'
                      '        if k not in os.environ: pass\n    os.environ.get(var)\n    x = "STRUCTCSE_G"\n')
    assert gen.env_reads_in(module) == {"MY_A", "MY_B", "MY_C", "MY_D", "MY_E", "MY_F", "STRUCTCSE_G"}


def test_every_eval_task_has_its_defaults_on_the_evaluate_page(gen):
    page = _page("docs/evaluate.md")
    block = page.split(gen.BEGIN, 1)[1].split(gen.END, 1)[0]
    names = re.findall(r'name="(\w+)"', _page("eval/tasks.py"))
    assert names and {t.name for t in gen.eval_tasks()} == set(names)
    for t in gen.eval_tasks():
        row = next((line for line in block.splitlines() if line.startswith(f"| `{t.name}` |")), None)
        assert row is not None, f"eval task {t.name} missing from docs/evaluate.md's defaults table"
        assert f"| `{t.default_split}` |" in row
    # the rule eval.cli applies when --split is not given
    splits = {t.name: t.default_split for t in gen.eval_tasks()}
    assert splits["sts"] == "dev" and splits["sts_all"] == "test" and splits["mrpc"] == "test"
    assert splits["srsd"] == splits["stc"] == splits["aspect_retrieval"] == "test"


def test_undocumented_key_is_an_error(gen):
    text = "from dataclasses import dataclass\n@dataclass\nclass C:\n    documented: int = 1  # says what\n" \
           "    bare: int = 2\n"
    cls = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef))
    with pytest.raises(gen.Undocumented, match="bare"):
        gen.dataclass_keys(cls, text, {})
