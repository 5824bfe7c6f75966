"""Every import between the project's packages, read from the source with ``ast`` (imports inside functions
included): none points up the stage order, and no two modules import each other, directly or round a loop.

    infra  <-  setformat  <-  ingest  <-  score  <-  train  <-  eval  <-  tune  <-  structcse (demo, CLI)  <-  bench

``python -m tests.test_imports`` prints the edges between packages ("pkg -> pkg (N imports)"), then any
upward edge and any cycle, with file:line.

How an import becomes an edge: ``import a.b.c`` and ``from a.b import c`` depend on the module ``a.b.c``
when it is one of ours (else on the closest enclosing module, ``from a.b import name`` on ``a.b``);
relative imports are resolved against the importing module's package; ``importlib.import_module("a.b")``
with a literal name counts too. Importing ``a.b.c`` is a dependency on ``a.b.c`` only, not on the
``a/__init__.py`` Python also runs on the way: that file's own imports are its own edges, so a loop
through a package's ``__init__`` shows where the ``__init__`` really takes part in it, and a package's
submodules importing each other's siblings never make a false loop through their parent.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# lowest first: a package may import only those at or before its own place
# (bench: the measurements, above everything; a folder of scripts without an ``__init__.py``)
STAGE_ORDER = ("infra", "setformat", "ingest", "score", "train", "eval", "tune", "structcse", "bench")


@dataclass(frozen=True)
class Import:
    source: str  # importing module, e.g. "eval.cli"
    target: str  # imported module of ours, e.g. "eval.scoreboard"
    file: str  # path relative to the root
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def module_files(root: Path, packages=STAGE_ORDER) -> dict[str, Path]:
    """``{module name: file}`` of every .py under the packages that exist under ``root``."""
    modules = {}
    for package in packages:
        folder = root / package
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _ours(name: str, modules) -> str | None:
    """``name`` if it is one of our modules, else its closest enclosing module of ours, else None."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported_names(tree: ast.AST, module: str, is_package: bool):
    """(line, dotted name, names imported from it or None) of every import in ``tree``, absolute."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            yield node.lineno, name, [alias.name for alias in node.names]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id == "import_module"))):
            yield node.lineno, node.args[0].value, None


def walk(root: Path = ROOT, packages=STAGE_ORDER) -> tuple[list[Import], list[Import]]:
    """(every import from one of our modules to another of ours, every import of a module of ours that does
    not exist: its ``target`` is the missing name)."""
    modules = module_files(root, packages)
    ours = {package_of(m) for m in modules} | set(packages)
    found, missing = [], []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = str(path.relative_to(root))
        for line, name, names in _imported_names(tree, module, path.name == "__init__.py"):
            if package_of(name) not in ours:
                continue
            if name not in modules:  # `from a.b import c` and `import a.b` need a module a.b
                missing.append(Import(module, name, where, line))
                continue
            targets = ([_ours(name if n == "*" else f"{name}.{n}", modules) for n in names] if names
                       else [name])
            for target in dict.fromkeys(targets):
                if target != module:
                    found.append(Import(module, target, where, line))
    return found, missing


def imports(root: Path = ROOT, packages=STAGE_ORDER) -> list[Import]:
    """Every import from one of our modules to one of our modules (itself excluded)."""
    return walk(root, packages)[0]


def package_of(module: str) -> str:
    return module.split(".", 1)[0]


def package_edges(found: list[Import]) -> Counter:
    """``{(package, package): number of imports}`` between different packages."""
    return Counter((package_of(i.source), package_of(i.target)) for i in found
                   if package_of(i.source) != package_of(i.target))


def upward(found: list[Import], order=STAGE_ORDER) -> list[Import]:
    rank = {p: k for k, p in enumerate(order)}
    return [i for i in found if rank[package_of(i.target)] > rank[package_of(i.source)]]


def cycles(found: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted; sorted."""
    graph: dict[str, set[str]] = {}
    for i in found:
        graph.setdefault(i.source, set()).add(i.target)
        graph.setdefault(i.target, set())
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(components)


def describe_cycle(component: list[str], found: list[Import]) -> str:
    members = set(component)
    inside = sorted({(i.source, i.target, i.where) for i in found if i.source in members and i.target in members})
    return " <-> ".join(component) + ":\n" + "\n".join(f"    {s} -> {t}  ({w})" for s, t, w in inside)


# --- the project's own imports


def test_no_import_points_up_the_stage_order():
    found = imports()
    assert found, "no imports found: the walker reads nothing"
    bad = upward(found)
    assert not bad, ("imports pointing up the order " + " < ".join(STAGE_ORDER) + ":\n"
                     + "\n".join(f"  {i.source} -> {i.target}  ({i.where})" for i in bad))


def test_ingest_is_a_stage_the_other_stages_read_its_sets_through_setformat():
    """score, train, eval and tune read what ingest wrote through ``setformat`` (the format, schemas, readers and
    writers, integrity), never through ingest's own modules: only the demo (structcse) and bench run ingest."""
    found = imports()
    into_ingest = [i for i in found if package_of(i.target) == "ingest" and package_of(i.source) != "ingest"]
    assert into_ingest, "no import of ingest found: the walker reads nothing"
    stages = [i for i in into_ingest if package_of(i.source) not in ("structcse", "bench")]
    assert not stages, "stages importing ingest's modules:\n" + "\n".join(
        f"  {i.source} -> {i.target}  ({i.where})" for i in stages)


BENCH_HELPERS = ("harness", "servers", "dumps", "ray_head", "loss_checks", "gpu_checks", "newcomer_blocks")


def test_no_bench_imports_another_bench():
    """A bench (``python bench/NAME.py``, its figures' JSON last) is imported by no other bench: what benches share
    lives in the helper modules (``bench/harness.py``, ``servers.py``, ``dumps.py``, ...)."""
    modules = {path.stem for path in (ROOT / "bench").glob("*.py")}
    assert set(BENCH_HELPERS) <= modules, sorted(set(BENCH_HELPERS) - modules)
    benches = {f"bench.{name}" for name in modules - set(BENCH_HELPERS) - {"__init__"}}
    shared = [i for i in imports() if i.source.startswith("bench.") and i.target in benches]
    assert not shared, "benches imported by other benches:\n" + "\n".join(
        f"  {i.source} -> {i.target}  ({i.where})" for i in shared)


def test_every_import_of_ours_names_a_module_that_exists():
    missing = walk()[1]  # imports inside functions fail only when called: a moved module must not leave one behind
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(
        f"  {i.source} imports {i.target}  ({i.where})" for i in missing)


def test_no_import_cycle_between_modules():
    found = imports()
    loops = cycles(found)
    assert not loops, "import cycles:\n" + "\n".join("  " + describe_cycle(c, found) for c in loops)


# --- the walker itself, on a package written here with known imports


def test_the_walker_finds_a_cycle_hidden_in_functions_and_no_false_one_through_init(tmp_path):
    files = {
        "lo/__init__.py": "",
        "lo/base.py": "",
        "hi/__init__.py": "from hi.tool import run\n",  # the package's __init__ imports its submodule
        "hi/tool.py": "from hi import helpers\n\ndef run():\n    from . import report\n",
        "hi/report.py": "import os\n\nclass R:\n    def m(self):\n        from hi.tool import run\n",
        "hi/helpers.py": "from lo import base\nfrom .sub import leaf\n",
        "hi/sub/__init__.py": "",
        "hi/sub/leaf.py": "from .. import helpers as h\nimport importlib\nimportlib.import_module('lo.base')\n",
        "lo/up.py": "def f():\n    import hi.helpers\n",
        "lo/gone.py": "def f():\n    from lo.moved import thing\n    import os.path\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found, missing = walk(tmp_path, ("lo", "hi"))
    assert [(i.source, i.target, i.where) for i in missing] == [("lo.gone", "lo.moved", "lo/gone.py:2")]
    edges = {(i.source, i.target) for i in found}
    assert edges == {
        ("hi", "hi.tool"), ("hi.tool", "hi.helpers"), ("hi.tool", "hi.report"), ("hi.report", "hi.tool"),
        ("hi.helpers", "lo.base"), ("hi.helpers", "hi.sub.leaf"), ("hi.sub.leaf", "hi.helpers"),
        ("hi.sub.leaf", "lo.base"), ("lo.up", "hi.helpers"),
    }
    # hi.tool <-> hi.report (inside a function and a method) and hi.helpers <-> hi.sub.leaf (relative);
    # "hi" -> hi.tool -> ... never leads back to "hi": no false loop through the __init__
    assert cycles(found) == [["hi.helpers", "hi.sub.leaf"], ["hi.report", "hi.tool"]]
    assert [(i.source, i.target, i.where) for i in upward(found, ("lo", "hi"))] == [
        ("lo.up", "hi.helpers", "lo/up.py:2")]
    assert package_edges(found) == Counter({("hi", "lo"): 2, ("lo", "hi"): 1})


def main() -> int:
    found = imports()
    print(f"imports between packages ({', '.join(p for p in STAGE_ORDER if (ROOT / p).is_dir())}; "
          "order " + " < ".join(STAGE_ORDER) + "):")
    for (source, target), n in sorted(package_edges(found).items(),
                                      key=lambda e: (STAGE_ORDER.index(e[0][0]), STAGE_ORDER.index(e[0][1]))):
        print(f"{source} -> {target} ({n} imports)")
    bad, loops = upward(found), cycles(found)
    missing = walk()[1]
    print(f"imports of missing modules: {len(missing)}")
    for i in missing:
        print(f"  {i.source} imports {i.target}  ({i.where})")
    print(f"upward: {len(bad)}")
    for i in bad:
        print(f"  {i.source} -> {i.target}  ({i.where})")
    print(f"cycles: {len(loops)}")
    for component in loops:
        print("  " + describe_cycle(component, found))
    return 1 if bad or loops or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
