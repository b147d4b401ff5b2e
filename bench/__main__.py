"""`python -m bench run --quick|--full|--tiny [--only a,b] [--no-anchors] [--read-generators N] [--out DIR]`;
`python -m bench report RUN_FOLDER` (report.md again); `python -m bench docs RUN_FOLDER` (docs/benchmarks.md's
results section from the run's results.json);
`python -m bench profile [writes] [heartbeats]` (py-spy on the leader under load);
`python -m bench hold [--groups 1000] [--minutes 30] [--processes 2] [--generator [--poll-period 5]]` (no
fault: elections, two-master beliefs, the load's lateness, RSS and CPU of every node over time).

Runs the scenarios in order, prints each one's figures, and writes results.json, report.md and the
PNG charts into bench-out/<UTC timestamp>/ (or --out). `python -m bench list` names the scenarios.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from ._report import write_report
from ._scenarios import SCENARIOS, select
from ._suite import PROFILES, Suite, run_suite

REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the suite and write the report")
    size = run.add_mutually_exclusive_group()
    for name in PROFILES:
        size.add_argument(f"--{name}", dest="profile", action="store_const", const=name)
    run.add_argument("--only", default="", help="comma-separated scenario names (default: all of the profile)")
    run.add_argument("--no-anchors", action="store_true", help="skip etcd and PySyncObj")
    run.add_argument("--read-generators", type=int, default=None,
                     help="generator processes of the many-clients read points (default: the profile's)")
    run.add_argument("--out", type=Path, default=None, help="output folder (default bench-out/<timestamp>)")
    commands.add_parser("list", help="name the scenarios")
    spy = commands.add_parser("profile", help="py-spy on the leader under the heaviest loads")
    spy.add_argument("loads", nargs="*", default=["writes", "heartbeats"], choices=["writes", "heartbeats"])
    spy.add_argument("--out", type=Path, default=None)
    hold = commands.add_parser("hold", help="G groups x 3 brokers for N minutes, no fault: elections, two masters")
    hold.add_argument("--groups", type=int, default=1000)
    hold.add_argument("--minutes", type=float, default=30.0)
    hold.add_argument("--processes", type=int, default=2, help="simulator processes (about 1,500 brokers each)")
    hold.add_argument("--generator", action="store_true",
                      help="pre-encoded heartbeats and 1004 polls instead of the simulator (10,000 groups fit)")
    hold.add_argument("--poll-period", type=float, default=5.0, metavar="S",
                      help="with --generator: each broker's 1004 poll, every S seconds (Java's "
                           "syncBrokerMetadataPeriod, 5 s); 0: no polls, beliefs stay as the set-up left them")
    hold.add_argument("--out", type=Path, default=None)
    again = commands.add_parser("report", help="write report.md again from a run's results.json")
    again.add_argument("folder", type=Path)
    docs = commands.add_parser("docs", help="regenerate docs/benchmarks.md's results section from a run's results.json")
    docs.add_argument("folder", type=Path, nargs="+", help="a run's folder (with --part same-run: one or more)")
    docs.add_argument("--docs", type=Path, default=REPO / "docs" / "benchmarks.md", help="the file to update")
    docs.add_argument("--part", choices=["results", "same-run"], default="results",
                      help="results: the main results section; same-run: the Java controller and NameServer "
                           "comparisons' section")
    return parser.parse_args(argv)


def run_profiles(loads: list[str], out: Path) -> int:
    import trio

    from rmqc.launcher import stop_all

    from ._profile import profile

    try:
        for load in loads:
            trio.run(profile, load, out)
    finally:
        stop_all()
    return 0


def run_hold(args: argparse.Namespace, out: Path) -> int:
    import json

    import trio

    from rmqc.launcher import stop_all

    from ._scn_hold import HoldOptions, hold

    options = HoldOptions(groups=args.groups, minutes=args.minutes, processes=args.processes, generator=args.generator,
                          poll_period_s=args.poll_period)
    print(f"rmqc bench hold {options} -> {out}", flush=True)
    try:
        result = trio.run(hold, options, out)
    finally:
        stop_all()
    (out / "hold.json").write_text(json.dumps(result, indent=1))
    figures = {k: v for k, v in result.items() if k not in ("samples", "timeline")}
    print(json.dumps(figures, indent=1))
    return 0


def rewrite_report(folder: Path) -> int:
    import json

    document = json.loads((folder / "results.json").read_text())
    profile = PROFILES[document["profile"]["name"]]
    suite = Suite(profile, folder, machine=document["machine"], results=document["results"],
                  started_s=document["started"])
    print(f"wrote {write_report(suite)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "list":
        for name, title, _ in SCENARIOS:
            print(f"{name:<18} {title}")
        return 0
    if args.command == "report":
        return rewrite_report(args.folder)
    if args.command == "docs":
        from ._docs import DocsError, update_docs, update_same_run_part

        try:
            if args.part == "same-run":
                print(f"wrote {update_same_run_part(args.folder, args.docs)}")
            elif len(args.folder) == 1:
                print(f"wrote {update_docs(args.folder[0], args.docs)}")
            else:
                raise DocsError("the results section is one run's: give one folder (or --part same-run)")
        except DocsError as error:
            print(f"python -m bench docs: {error}", file=sys.stderr)
            return 2
        return 0
    out = args.out or REPO / "bench-out" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    if args.command == "profile":
        return run_profiles(args.loads, out)
    if args.command == "hold":
        return run_hold(args, out)
    profile = PROFILES[args.profile or "quick"]
    if args.read_generators is not None:
        profile = dataclasses.replace(profile, read_generators=args.read_generators)
    suite = Suite.for_run(profile, out, skip_anchors=args.no_anchors)
    print(f"rmqc bench ({profile.name}) -> {out}", flush=True)
    run_suite(suite, select(profile.name, args.only))
    report = write_report(suite)
    print(f"\nwrote {out / 'results.json'} and {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
