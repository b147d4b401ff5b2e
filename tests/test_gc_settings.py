"""The collector settings a serving node runs with (rmqc._gc), checked in a child process so the
test process keeps its own."""

from __future__ import annotations

import json
import subprocess
import sys

from rmqc._gc import SERVING_YOUNG_THRESHOLD


def test_a_serving_node_freezes_its_imports_and_collects_young_objects_less_often() -> None:
    probe = ("import gc, json; from rmqc._gc import tune_for_serving; default = gc.get_threshold(); "
             "tune_for_serving(); print(json.dumps([default, gc.get_threshold(), gc.get_freeze_count()]))")
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    default, tuned, frozen = json.loads(output.stdout)
    assert tuned == [SERVING_YOUNG_THRESHOLD, default[1], default[2]]
    assert SERVING_YOUNG_THRESHOLD > default[0]
    assert frozen > 0  # what was imported before serving is out of the collector's walks
