"""Help text that says what to type, not Python types.

Typer 0.2x labels every parameter with its annotation: `--json <bool>`, `names... <list[str]>`,
usage `{data_dir}`. rmqc's help shows flags bare, a value as its METAVAR (or its type in capitals,
as Click always did: INT, TEXT, PATH) and arguments as NAME / [NAME]... . Typer builds its
parameters from its own classes, so the two display methods are replaced on them, once; a Typer
without them (the classic labels) is left alone. tests/cli/test_cli_conventions.py renders every
command's help and fails if a Python type shows again.
"""

from __future__ import annotations

import inspect
import re
from typing import Any


def use_plain_labels() -> None:
    from typer import core

    option, argument = getattr(core, "TyperOption", None), getattr(core, "TyperArgument", None)
    if option is None or argument is None or not hasattr(argument, "_usage_display_name"):
        return
    option.display_type_rich = _option_label
    argument.display_type_rich = lambda self, ctx: None  # the name column already says it
    argument._usage_display_name = _argument_usage


def _option_label(self: Any, ctx: Any) -> str | None:
    if self.is_flag:
        return None
    if self.metavar is not None:
        return str(self.metavar)
    label = re.sub(r"list\[(\w+)\]", r"\1", self.display_type(ctx).strip("<>")).replace(" range", "")
    return {"str": "TEXT", "int": "INT", "float": "FLOAT", "path": "PATH"}.get(label, label.upper())


def _argument_usage(self: Any) -> str:
    name = str(self.metavar or self.name).upper()
    name = name if self.required else f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def unwrap_help(app: Any) -> None:
    """Each paragraph of every command's help as one line, which Rich then wraps to the terminal:
    docstrings are wrapped at 100 columns in the source, and Typer kept those breaks (ragged lines
    on a wide terminal, doubled breaks on a narrow one). Paragraphs are kept; a paragraph whose
    lines are a list or code (indented, or starting with `-`, `|` or a digit and `.`) is left as it is."""
    for command in app.registered_commands:
        text = command.help or (inspect.getdoc(command.callback) if command.callback else None)
        if text:
            command.help = unwrap(text)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            unwrap_help(group.typer_instance)


_LISTED = re.compile(r"^\s*(?:[-*|]|\d+\.)\s|^\s{2,}")


def unwrap(text: str) -> str:
    paragraphs = text.split("\n\n")
    return "\n\n".join(p if any(_LISTED.match(line) for line in p.splitlines()[1:]) or p.startswith("\b")
                        else " ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
