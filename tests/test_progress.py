"""The driver's progress bar follows rank 0's progress file; plain lines when not on a terminal."""

import io
import threading
import time

from train.progress import ProgressBar, ProgressWriter, wants_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_follows_the_steps_rank_0_writes_and_ends_at_the_last(tmp_path):
    path = tmp_path / "run" / "progress.json"
    screen = Terminal()
    bar = ProgressBar(str(path), stream=screen, poll_s=0.01)
    writer = ProgressWriter(str(path), total=40, start=10)  # a run resumed at step 10
    reads = []

    def train():
        for step in range(11, 41):
            writer.write(step, lambda: reads.append(step) or 0.5)
            time.sleep(0.002)

    worker = threading.Thread(target=train)
    worker.start()
    worker.join()
    assert bar.close() == 40 and bar.bar.total == 40
    assert reads[-1] == 40 and len(reads) < 30  # the loss (a device sync) is read only when the file is written
    drawn = screen.getvalue()
    assert "40/40" in drawn and "loss=0.5" in drawn


def test_a_bar_only_on_a_terminal_and_a_local_run_folder():
    assert wants_bar(Terminal(), "runs/x")
    assert not wants_bar(io.StringIO(), "runs/x")  # a job log, CI, | tee: the plain [train] lines
    assert not wants_bar(Terminal(), "s3://bucket/runs/x")
