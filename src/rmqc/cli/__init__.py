"""The `rmqc` command line (Typer). Each command group lives in its own module and is added here."""
