"""Entry point of the `rmqc` command (pyproject: `rmqc = "rmqc.cli.main:app"`).

`rmqc serve` is on a restart's critical path (design target: serving again within 1 s), so the
console script reaches it without importing Typer, Click or Rich (together about a third of the
serve path's imports): `app` is a small dispatcher that hands `serve ARGS...` straight to
`rmqc.cli.serve.serve_main` and builds the Typer app (every command group) only for the other
commands. Everything else about `app` (what `typer.testing.CliRunner` and `typer.main.get_command`
read from it) is the Typer app's. Heavy imports (pyspark, trio) stay inside the command functions so
`rmqc --help` is fast.
"""

import sys
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

SERVE = "serve"


@cache
def typer_app() -> "typer.Typer":
    """The Typer app of every command (built once, on first use)."""
    import typer

    from ._help import unwrap_help, use_plain_labels
    from .serve import SUMMARY, serve_main

    use_plain_labels()

    app = typer.Typer(
        name="rmqc",
        help="rmqc: a high-availability controller for Apache RocketMQ 5.",
        no_args_is_help=True,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits it
    )

    def print_version(asked: bool) -> None:
        if asked:
            from rmqc import __version__

            typer.echo(f"rmqc {__version__}")
            raise typer.Exit()

    @app.callback()
    def main(version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=print_version,
                                          expose_value=False, help="print the version and exit")) -> None:
        """rmqc: a high-availability controller for Apache RocketMQ 5."""

    # `serve` parses its own options (rmqc.cli.serve): Typer passes every argument through, --help
    # too. (No `from __future__ import annotations` here: Typer reads `ctx: typer.Context` at runtime.)
    @app.command(SERVE, help=SUMMARY, add_help_option=False,
                 context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def serve_command(ctx: typer.Context) -> None:
        raise typer.Exit(serve_main(ctx.args))

    # The other command groups, one line each.
    from .admin import admin_app
    from .analyze import analyze_command
    from .chaos import chaos_app
    from .dev import dev_app
    from .events import events_command
    from .health import health_command
    from .log import log_app
    from .members import members_app
    from .migrate import migrate_app
    from .namesrv_admin import kv_app, topic_app
    from .sim import sim_app
    from .status import status_command

    app.add_typer(log_app, name="log")
    app.command("analyze")(analyze_command)
    admin_app.command("health")(health_command)
    admin_app.add_typer(members_app, name="members")  # here: members.py builds on admin.py's options
    admin_app.add_typer(topic_app, name="topic")  # namesrv_admin.py builds on admin.py's options too
    admin_app.add_typer(kv_app, name="kv")
    app.add_typer(admin_app, name="admin")
    app.command("status")(status_command)
    app.command("events")(events_command)
    app.add_typer(dev_app, name="dev")
    app.add_typer(sim_app, name="sim")
    app.add_typer(chaos_app, name="chaos")
    app.add_typer(migrate_app, name="migrate")
    unwrap_help(app)
    return app


class RmqcApp:
    """What the console script calls: `serve` without Typer, anything else through Typer."""

    def __call__(self, args: Sequence[str] | None = None, **kwargs: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if argv[:1] == [SERVE] and not kwargs:
            from .serve import serve_main

            # As a Typer app in standalone mode: the call ends the process with the command's code.
            raise SystemExit(serve_main(argv[1:]))
        return typer_app()(args=args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(typer_app(), name)


app = RmqcApp()
