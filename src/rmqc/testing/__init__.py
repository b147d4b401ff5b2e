"""rmqc.testing: test helpers shipped with the package.

- `rmqc.testing.linearizability`: the register linearizability checker (re-exported here; pure, so
  the Spark pipeline and the real-process tests use it too).
- `rmqc.testing.sim`: the deterministic simulator (`python -m rmqc.testing.sim --seeds N`); imported
  on demand, since it pulls in the Raft core.
- `rmqc.testing.storage_contract`: the contract suite every Storage must pass.
"""

from .linearizability import HistoryFormatError as HistoryFormatError
from .linearizability import KeyResult as KeyResult
from .linearizability import Op as Op
from .linearizability import SearchBoundExceeded as SearchBoundExceeded
from .linearizability import check_history as check_history
from .linearizability import check_key as check_key
from .linearizability import read_history as read_history
from .linearizability import write_history as write_history

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
