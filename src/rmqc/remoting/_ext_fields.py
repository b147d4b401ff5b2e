"""extFields values: Java sends every custom-header field as a string (spec 1.5).

Lenient clients send JSON numbers and booleans instead; they are converted the way Java's
`String.valueOf` would print them, so handlers only ever see strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import cast

__all__ = ["ext_fields_from", "ext_value_text"]

ONLY_STR = frozenset({str})  # the types extFields values have when Java sent them


def ext_value_text(value: object) -> str | None:
    """The string Java would put in extFields for `value`; None when `value` cannot be one.

    Booleans first: in Python `True` is also an int.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return None


def ext_fields_from(values: Mapping[str, object]) -> dict[str, str]:
    """Header fields -> extFields: None values are left out (Java omits null fields), the rest as text.

    Raises TypeError for a value that has no Java text form (list, dict, NaN...): that is a bug in
    the caller, not bad input from a peer.
    """
    if ONLY_STR.issuperset(map(type, values.values())):
        # already Java's text (the usual answer's fields): one copy, no loop
        return cast(dict[str, str], dict(values))
    fields: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        text = ext_value_text(value)
        if text is None:
            raise TypeError(f"extFields[{key!r}] = {value!r} has no Java string form")
        fields[key] = text
    return fields
