"""rmqc.metrics is pure: no trio, no sockets, no threads, no clocks (the exporter's HTTP threads and
the node's event loop are rmqc.node's), so the simulator and tests use a node's series and its
status page's document and answers without the Trio shell."""

from __future__ import annotations

import ast
from pathlib import Path

import rmqc.metrics

# wsgiref, http, urllib: serving and fetching are the exporter's (rmqc.node._exporter)
FORBIDDEN_MODULES = {"trio", "socket", "ssl", "select", "selectors", "threading", "time", "asyncio", "wsgiref",
                     "http", "urllib", "rmqc.node", "rmqc.testing"}


def forbidden_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        found += [name for name in names
                  if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_MODULES)]
    return found


def test_no_module_of_metrics_imports_io_threads_or_clocks() -> None:
    modules = sorted(Path(rmqc.metrics.__file__).parent.glob("*.py"))
    assert {path.name for path in modules} >= {"__init__.py", "_node_metrics.py", "_status_page.py"}
    assert {path.name: forbidden_imports(path) for path in modules} == {path.name: [] for path in modules}


def test_the_check_sees_each_kind_of_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import trio\nimport time, struct\nfrom socket import socket\nimport threading\n"
                      "from wsgiref.simple_server import make_server\nfrom rmqc.node._peers import PeerLinks\n"
                      "from ._node_metrics import NodeMetrics\n")
    assert forbidden_imports(module) == ["trio", "time", "socket", "threading", "wsgiref.simple_server",
                                         "rmqc.node._peers"]
