"""Reading a report chart back: how many pixels show its data colour, and its axis ranges (the PNG
text chunks rmqc.pipeline._report writes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import to_rgb
from PIL import Image


def data_pixels(png: Path, colour: str) -> int:
    """Pixels close to `colour` (a blank chart has axes and labels, but none of these; the
    tolerance takes in the anti-aliased edges of thin lines)."""
    want = np.array([c * 255 for c in to_rgb(colour)])
    with Image.open(png) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=float)
    return int((np.abs(pixels - want).max(axis=-1) <= 24).sum())


def axis_ranges(png: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    with Image.open(png) as image:
        text = image.text  # type: ignore[attr-defined]
    x_low, x_high = (float(v) for v in text["x-range"].split(";"))
    y_low, y_high = (float(v) for v in text["y-range"].split(";"))
    return (x_low, x_high), (y_low, y_high)
