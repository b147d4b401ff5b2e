"""The exit codes of every rmqc command, one table (README "Exit codes"); `rmqc serve` imports it
too, so it imports nothing."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What an rmqc command's exit status means. Aliases name the same code as each command
    meets it."""

    OK = 0
    REFUSED = 1  # the answer is no: a controller refused the request, `analyze` found problems,
    PROBLEMS_FOUND = 1  # `log verify` (or a read) found corruption, `serve` could not serve
    CORRUPT = 1
    CANNOT_SERVE = 1
    USAGE = 2  # bad options or unusable input (Typer/Click and argparse use 2 for their own too)
    UNREACHABLE = 3  # no controller answered (connection refused, timeout, no leader)
    NOT_A_DATA_DIR = 4  # the directory holds no rmqc log
    NODE_RUNNING = 5  # the data directory is in use by a running node
    STORAGE_FAILED = 74  # serve: a write or fsync failed (sysexits EX_IOERR; rmqc.node's EXIT_STORAGE_FAILED)
