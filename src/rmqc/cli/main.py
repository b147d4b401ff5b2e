"""Entry point of the `rmqc` command: one Typer app, command groups added from their modules.

Heavy imports (pyspark, trio) stay inside the command functions so `rmqc --help` is fast.
"""

import typer

app = typer.Typer(
    name="rmqc",
    help="rmqc: a high-availability controller for Apache RocketMQ 5.",
    no_args_is_help=True,
    add_completion=False,
)

# Command groups register themselves below, one line each.
from .serve import serve_command; app.command("serve")(serve_command)
from .log import log_app; app.add_typer(log_app, name="log")
from .analyze import analyze_command; app.command("analyze")(analyze_command)
from .admin import admin_app; app.add_typer(admin_app, name="admin")
from .status import status_command; app.command("status")(status_command)
from .dev import dev_app; app.add_typer(dev_app, name="dev")
from .sim import sim_app; app.add_typer(sim_app, name="sim")
