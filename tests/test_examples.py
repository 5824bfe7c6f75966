"""The three scripts of examples/ run on a folder laid out as ``structcse demo --out demo_out`` lays it out.

The folder is made of the session's fixtures (the demo world, its ingested sets and NLI pairs, the tiny
BERT) and three models trained here in local mode for a few steps (SimCSE, GaussCSE, RSE: the demo's
``runs/<method>/model``); each script runs as a user runs it, ``python examples/X.py FOLDER``, in a
subprocess, and must exit 0 and print what it says it prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.end_to_end  # bench/end_to_end.py runs it; the default run leaves it out

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
TRAINED = {"simcse_unsup": "sets", "gausscse": "pairs", "rse": "pairs"}  # method -> the demo folder it trains on


def build_demo_like(root: Path, world, sets: Path, pair_sets: Path, base_model: Path) -> Path:
    """``root`` with the demo's layout: world/, sets/, pairs/, models/base, runs/<method>/model."""
    from structcse.configs import training_config
    from train.run import run

    root.mkdir(parents=True, exist_ok=True)
    for name, target in (("world", world.root), ("sets", sets), ("pairs", pair_sets)):
        (root / name).symlink_to(Path(target).resolve(), target_is_directory=True)
    (root / "models").mkdir()
    (root / "models" / "base").symlink_to(Path(base_model).resolve(), target_is_directory=True)
    for method, data in TRAINED.items():
        run(training_config(method, [
            f"model={root / 'models' / 'base'}", f"data={root / data}", f"storage_path={root / 'runs'}",
            f"run_name={method}", "pooling=mean", "max_len=32", "batch_size=16", "max_steps=2", "num_workers=0",
            "checkpoint_every_steps=0", "log_every_steps=0", "dev_data=null", "warmup_steps=0", "chunk_size=null",
            "mixed_precision=none"]))
    return root


@pytest.fixture(scope="module")
def demo_folder(ray_session, demo_world, demo_sets, demo_pair_sets, demo_tiny_bert, tmp_path_factory):
    return build_demo_like(tmp_path_factory.mktemp("examples") / "demo_out", demo_world, demo_sets[0],
                           demo_pair_sets[0], demo_tiny_bert)


SCRIPTS = ("encode_and_search.py", "score_pairs.py", "read_set_and_evaluate.py")


@pytest.fixture(scope="module")
def example_outputs(demo_folder) -> dict[str, subprocess.CompletedProcess]:
    """Each script's run, ``python examples/X.py FOLDER``, the three at once (most of each is importing torch)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    running = {name: subprocess.Popen([sys.executable, str(EXAMPLES / name), str(demo_folder)], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in SCRIPTS}
    done = {}
    for name, process in running.items():
        try:
            out, err = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        done[name] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return done


def run_example(name: str, outputs: dict) -> str:
    done = outputs[name]
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    assert len((EXAMPLES / name).read_text().splitlines()) <= 45  # short enough to read at a glance
    return done.stdout


def test_encode_and_search(example_outputs):
    out = run_example("encode_and_search.py", example_outputs)
    assert "method: simcse_unsup, similarity: cosine" in out
    assert out.count("query: ") == 3 and "encoded " in out


def test_score_pairs(example_outputs):
    out = run_example("score_pairs.py", example_outputs)
    assert "gausscse: similarity = gausscse_symmetric_kl" in out and "rse: similarity = rse_relational" in out
    assert out.count("Spearman vs gold on 150 pairs") == 2
    assert "rse relations: contradiction" in out and "entailment pair: " in out


def test_read_set_and_evaluate(example_outputs):
    out = run_example("read_set_and_evaluate.py", example_outputs)
    assert "nli_triplets: 96 rows (manifest: 96)" in out
    figures = {line.split(":")[0]: line for line in out.splitlines() if line.startswith(("simcse", "gausscse", "rse"))}
    assert set(figures) == {"simcse_unsup sts (test)", "gausscse nli (test)", "rse relational_sts (test)"}
    assert "'auprc'" in figures["gausscse nli (test)"] and "'spearman'" in figures["rse relational_sts (test)"]


# ---------------------------------------------------------------- the API the scripts use


def test_import_structcse_is_light():
    code = ("import sys, structcse; heavy = [m for m in ('torch', 'pyarrow', 'ray', 'sentence_transformers') "
            "if m in sys.modules]; print(sorted(structcse.__all__), heavy)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                          check=False)
    assert done.stdout.strip() == ("['TrainedModel', '__version__', 'evaluate', 'load', 'read_manifest', 'read_set', "
                                   "'tasks'] []"), done.stderr


def test_evaluate_gives_what_the_command_line_gives(demo_folder, demo_world, tmp_path):
    import structcse
    from eval.cli import main as eval_main

    model = structcse.load(demo_folder / "runs" / "rse")  # a run folder: its model/
    assert model.method_name == "rse" and model.similarity_name == "rse_relational"
    ours = structcse.evaluate(model, "relational-sts", data=demo_world.sts_dir, split="test", limit=40)
    assert eval_main(["--task", "relational_sts", "--model", str(demo_folder / "runs" / "rse" / "model"),
                      "--data", str(demo_world.sts_dir), "--split", "test", "--limit", "40",
                      "--output", str(tmp_path / "cli.json")]) == 0
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert ours["spearman"] == cli["spearman"] and ours["cosine_spearman"] == cli["cosine_spearman"]
    assert ours["n_pairs"] == cli["n_pairs"] == 40
    sts = structcse.evaluate(model, "sts", data=demo_world.sts_dir)  # an encoder task: cosine, dev by default
    assert sts["split"] == "dev" and sts["spearman"] == pytest.approx(
        structcse.evaluate(model, "sts", data=demo_world.sts_dir, split="dev")["spearman"])


def test_api_errors_are_one_line(demo_folder, demo_world):
    import structcse
    from eval.run import UsageError
    from score.model import MethodMismatchError

    simcse = structcse.load(demo_folder / "runs" / "simcse_unsup" / "model")
    with pytest.raises(MethodMismatchError, match="task relational_sts needs a model whose method has "
                                                  "relation_scores; .* is a simcse_unsup model"):
        structcse.evaluate(simcse, "relational_sts", data=demo_world.sts_dir)
    assert issubclass(UsageError, ValueError)
    with pytest.raises(UsageError, match=r"^weights does not apply to task sts \(it takes plots\)$"):
        structcse.evaluate(simcse, "sts", data=demo_world.sts_dir, weights="entailment=1")
    with pytest.raises(ValueError, match="task sts has no split 'trial'"):
        structcse.evaluate(simcse, "sts", data=demo_world.sts_dir, split="trial")
    with pytest.raises(ValueError, match="unknown task 'stss'"):
        structcse.evaluate(simcse, "stss", data=demo_world.sts_dir)
    with pytest.raises(FileNotFoundError, match="is a folder of sets, not one set: name one, e.g. "
                                                r"read_set\(.*'entities'\) \(sets there: entities, entity_pairs"):
        structcse.read_set(demo_folder / "sets")
    with pytest.raises(FileNotFoundError, match=r"set folder does not exist: .*sentense .*; did you mean .*sentences\?"):
        structcse.read_set(demo_folder / "sets", "sentense")
    with pytest.raises(FileNotFoundError, match="model folder does not exist"):
        structcse.load(demo_folder / "runs" / "nothing" / "model")
    assert set(structcse.tasks()) >= {"sts", "sts_all", "nli", "relational_sts", "srsd"}
