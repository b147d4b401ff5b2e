"""rmqc.metrics is pure: no trio, no sockets, no threads, no clocks (the exporter's HTTP threads and
the node's event loop are rmqc.node's), so the simulator and tests use a node's series and its
status page's document and answers without the Trio shell."""

from __future__ import annotations

from pathlib import Path

import rmqc.metrics
from rmqc.testing.imports import forbidden_imports

# wsgiref, http, urllib: serving and fetching are the exporter's (rmqc.node._exporter)
FORBIDDEN_MODULES = {"trio", "socket", "ssl", "select", "selectors", "threading", "time", "asyncio", "wsgiref",
                     "http", "urllib", "rmqc.node", "rmqc.testing"}




def test_no_module_of_metrics_imports_io_threads_or_clocks() -> None:
    modules = sorted(Path(rmqc.metrics.__file__).parent.glob("*.py"))
    assert {path.name for path in modules} >= {"__init__.py", "_node_metrics.py", "_status_page.py"}
    found = {path.name: forbidden_imports(path, FORBIDDEN_MODULES) for path in modules}
    assert found == {path.name: [] for path in modules}


def test_the_check_sees_each_kind_of_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import trio\nimport time, struct\nfrom socket import socket\nimport threading\n"
                      "from wsgiref.simple_server import make_server\nfrom rmqc.node._peers import PeerLinks\n"
                      "from ._node_metrics import NodeMetrics\n")
    assert forbidden_imports(module, FORBIDDEN_MODULES) == ["trio", "time", "socket", "threading",
                                                            "wsgiref.simple_server", "rmqc.node._peers"]
