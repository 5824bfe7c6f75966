"""The project's own lines are ``logging`` records of a logger per module, printed by one handler on the
package loggers (``infra.logs.project_lines``): the message alone, on the ``sys.stdout`` of the moment, once,
whatever level the root logger has (a quiet Ray Train worker's is WARNING), in a quiet run and a verbose one."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys

from tests.conftest import REPO


def test_a_line_is_the_message_alone_on_stdout_once_whatever_the_root_level(capsys):
    from infra.logs import project_lines

    project_lines()
    root = logging.getLogger()
    level, extra = root.level, logging.StreamHandler(sys.stdout)  # a root handler, as Ray Train's workers have
    root.setLevel(logging.WARNING)
    root.addHandler(extra)
    try:
        logging.getLogger("ingest.pipeline").info("[ingest] a line")
        logging.getLogger("train.ray_env").warning("[train] warning: a warning")
        logging.getLogger("train.loop").debug("not at INFO")
    finally:
        root.removeHandler(extra)
        root.setLevel(level)
    assert capsys.readouterr().out == "[ingest] a line\n[train] warning: a warning\n"


def test_the_stdout_of_the_moment_gets_the_line():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        logging.getLogger("tune.search").info("[tune] redirected")
    assert buffer.getvalue() == "[tune] redirected\n"


def test_project_lines_is_idempotent_and_keeps_a_level_set_on_a_package(capsys):
    from infra.logs import PROJECT_PACKAGES, project_lines

    ingest = logging.getLogger("ingest")
    before = ingest.level
    ingest.setLevel(logging.WARNING)  # a library user silencing ingest's lines
    try:
        project_lines()
        project_lines()
        for name in PROJECT_PACKAGES:
            logger = logging.getLogger(name)
            assert len([h for h in logger.handlers if getattr(h, "structcse_lines", False)]) == 1, name
            assert logger.propagate is False, name
        assert ingest.level == logging.WARNING
        logging.getLogger("ingest.pipeline").info("[ingest] silenced")
        logging.getLogger("ingest.pipeline").warning("[ingest] warning: still said")
    finally:
        ingest.setLevel(before)
    assert capsys.readouterr().out == "[ingest] warning: still said\n"


def test_lines_on_stderr_and_lines_muted_last_for_their_block(capsys):
    from infra.logs import lines_muted, lines_on_stderr

    with lines_on_stderr():
        logging.getLogger("eval.scoreboard").info("[report] to stderr")
    logging.getLogger("eval.scoreboard").info("[report] to stdout")
    level = logging.getLogger("eval").level
    with lines_muted("eval", "score"):
        logging.getLogger("eval.scoreboard").info("[report] muted")
        logging.getLogger("score.sts_data").warning("a warning is not muted")
    assert logging.getLogger("eval").level == level
    said = capsys.readouterr()
    assert said.err == "[report] to stderr\n"
    assert said.out == "[report] to stdout\na warning is not muted\n"


def test_a_quiet_run_and_its_workers_print_the_lines(tmp_path):
    """Outside a terminal (a pipe: the quiet settings) and in a Ray Train worker after ``quiet_worker`` (the
    root logger at WARNING): the lines are on stdout, plain, once; with --verbose too."""
    code = ("import logging, sys; from infra.logs import setup_logging_from_argv, quiet_worker; "
            "quiet = setup_logging_from_argv(sys.argv[1:]); "
            "logging.getLogger('ingest.pipeline').info('[ingest] driver line'); "
            "quiet_worker(); "
            "logging.getLogger('train.loop').info('[train] worker line'); "
            "print(quiet, logging.getLogger().level)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRUCTCSE_")}
    for verbose, quiet in (([], "True 30"), (["--verbose"], "False")):
        done = subprocess.run([sys.executable, "-c", code, *verbose], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=60, check=True)
        lines = done.stdout.splitlines()
        assert lines[:2] == ["[ingest] driver line", "[train] worker line"], done.stdout
        assert lines[2].startswith(quiet), done.stdout
        assert "driver line" not in done.stderr and "worker line" not in done.stderr, done.stderr
