"""rmqc.testing: test helpers shipped with the package.

- the register linearizability checker, re-exported from `rmqc.linearizability` (pure; the Spark
  pipeline and `rmqc chaos` use it too, so it lives outside this package, as does the process
  launcher `rmqc.launcher` and the fault proxy `rmqc.chaos._tcp_proxy`).
- `rmqc.testing.sim`: the deterministic simulator (`python -m rmqc.testing.sim --seeds N`); imported
  on demand, since it pulls in the Raft core.
- `rmqc.testing.storage_contract`: the contract suite every Storage must pass.
"""

from rmqc.linearizability import (
    HistoryFormatError as HistoryFormatError,
    KeyResult as KeyResult,
    Op as Op,
    SearchBoundExceeded as SearchBoundExceeded,
    check_history as check_history,
    check_key as check_key,
    read_history as read_history,
    write_history as write_history,
)

__all__ = [
    "HistoryFormatError",
    "KeyResult",
    "Op",
    "SearchBoundExceeded",
    "check_history",
    "check_key",
    "read_history",
    "write_history",
]
