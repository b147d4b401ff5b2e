"""Line commands that steer a running fleet (stdin of `rmqc sim brokers`), answered as JSON objects.

    kill NAME ID | kill-master NAME | hang NAME ID | hang-master NAME | resume NAME ID
    restart NAME ID | lag NAME ID | catch-up NAME ID | beliefs [NAME ...] | summary | help
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from rmqc.brokersim._errors import SimError, UnknownBroker
from rmqc.brokersim._fleet import BrokerFleet

__all__ = ["CONTROL_HELP", "run_control_line"]

CONTROL_HELP = __doc__.split("\n\n", 1)[1].strip()


async def run_control_line(fleet: BrokerFleet, line: str) -> dict[str, Any]:
    """Execute one command line on `fleet`; `{"ok": true, ...}` or `{"ok": false, "error": ...}`."""
    words = line.split()
    if not words:
        return {"ok": True}
    handler = _COMMANDS.get(words[0])
    if handler is None:
        return {"ok": False, "error": f"unknown command {words[0]!r}", "help": CONTROL_HELP}
    try:
        return {"ok": True, "command": words[0], **await handler(fleet, words[1:])}
    except (SimError, ValueError) as error:
        return {"ok": False, "command": words[0], "error": str(error)}


def _name_and_id(args: list[str]) -> tuple[str, int]:
    if len(args) != 2 or not args[1].isdigit():
        raise ValueError("expected: NAME ID (the broker-set name and the controller's broker id)")
    return args[0], int(args[1])


def _given(fleet: BrokerFleet, args: list[str]) -> tuple[str, int]:
    return _name_and_id(args)


def _master(fleet: BrokerFleet, args: list[str]) -> tuple[str, int]:
    if len(args) != 1:
        raise ValueError("expected: NAME (the broker-set name)")
    master = fleet.master_of(args[0])
    if master is None:
        raise UnknownBroker(f"{args[0]} has no serving master right now")
    return args[0], master


def _acting(action: Callable[[BrokerFleet, str, int], None], pick: Callable[[BrokerFleet, list[str]], tuple[str, int]]
            ) -> Callable[[BrokerFleet, list[str]], Awaitable[dict[str, Any]]]:
    async def run(fleet: BrokerFleet, args: list[str]) -> dict[str, Any]:
        name, broker_id = pick(fleet, args)
        action(fleet, name, broker_id)
        return {"brokerName": name, "brokerId": broker_id}

    return run


async def _restart(fleet: BrokerFleet, args: list[str]) -> dict[str, Any]:
    name, broker_id = _name_and_id(args)
    await fleet.restart(name, broker_id)
    return {"brokerName": name, "brokerId": broker_id}


async def _beliefs(fleet: BrokerFleet, args: list[str]) -> dict[str, Any]:
    return {"beliefs": [belief.to_json() for belief in fleet.beliefs(args or None)]}


async def _summary(fleet: BrokerFleet, args: list[str]) -> dict[str, Any]:
    return {"summary": fleet.summary()}


async def _help(fleet: BrokerFleet, args: list[str]) -> dict[str, Any]:
    return {"help": CONTROL_HELP}


_COMMANDS: dict[str, Callable[[BrokerFleet, list[str]], Awaitable[dict[str, Any]]]] = {
    "kill": _acting(BrokerFleet.kill, _given),
    "kill-master": _acting(BrokerFleet.kill, _master),
    "hang": _acting(BrokerFleet.hang, _given),
    "hang-master": _acting(BrokerFleet.hang, _master),
    "resume": _acting(BrokerFleet.resume, _given),
    "lag": _acting(lambda fleet, name, i: fleet.lag(name, i, True), _given),
    "catch-up": _acting(lambda fleet, name, i: fleet.lag(name, i, False), _given),
    "restart": _restart,
    "beliefs": _beliefs,
    "summary": _summary,
    "help": _help,
}
