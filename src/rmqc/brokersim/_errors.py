"""Errors of the broker simulator; all derive from rmqc.errors."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, ConfigError, RmqcError

__all__ = ["FleetTooLarge", "IdentityMismatch", "NotConverged", "RegistrationFailed", "SimError", "UnknownBroker"]


class SimError(RmqcError):
    """Something the simulator was asked to do could not be done."""


class RegistrationFailed(SimError):
    """One registration attempt (spec 7.2) failed; the broker retries it."""


class IdentityMismatch(SimError, ConfigError):
    """An identity file names another cluster or broker-set than the broker's configuration."""


class UnknownBroker(SimError):
    """No simulated broker of that name and id runs in this fleet."""


class NotConverged(SimError):
    """The fleet did not converge within the bound; the message lists what disagreed."""

    def __init__(self, timeout_s: float, problems: list[str]) -> None:
        shown = "; ".join(problems[:10]) + (f"; ... {len(problems) - 10} more" if len(problems) > 10 else "")
        super().__init__(f"not converged after {timeout_s:.1f} s: {shown}")
        self.problems = problems


class FleetTooLarge(SimError, BoundExceeded):
    """More brokers than one process can hold (file descriptors: one listener + one socket per controller each)."""
