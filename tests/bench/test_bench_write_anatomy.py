"""bench/bench_write_anatomy.py's readings: `strace -c`'s table and a process's threads' CPU."""

from __future__ import annotations

import os
from pathlib import Path

from bench.bench_write_anatomy import strace_counts, thread_cpu_s

STRACE_TABLE = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 52.14    0.929881          67     13822         1 read
 29.05    0.518137      518136         1         1 restart_syscall
  3.91    0.069742           4     14090           write
  2.45    0.043612          15      2740           fdatasync
------ ----------- ----------- --------- --------- ----------------
100.00    1.561372          41     30653         2 total
"""


def test_strace_counts_are_the_calls_column_most_first_without_the_total(tmp_path: Path) -> None:
    table = tmp_path / "leader.strace"
    table.write_text("strace: Process 1 attached\n" + STRACE_TABLE)
    assert strace_counts(table) == [("write", 14090), ("read", 13822), ("fdatasync", 2740), ("restart_syscall", 1)]


def test_thread_cpu_lists_this_process_main_thread_and_grows_with_work() -> None:
    before = thread_cpu_s(os.getpid())
    assert os.getpid() in before  # the main thread's id is the process id
    total = sum(i * i for i in range(3_000_000))  # about 0.1 s of user CPU in this thread
    after = thread_cpu_s(os.getpid())
    assert total > 0 and after[os.getpid()][0] > before[os.getpid()][0]
