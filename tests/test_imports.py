"""The import graph of fairq: no cycles, and dependencies that point one way (the design's
house rule: cli/web/worker/integrations -> app -> backends -> contract -> policy/job).

Read from the source (``ast``), the imports a module runs when it is imported: those at its
top level, not those inside functions or under ``TYPE_CHECKING``. Importing ``fairq.a.b``
runs ``fairq/a/__init__.py`` too, so a module depends on the packages above what it imports
(but its own: a package's ``__init__`` re-exporting its modules is not a cycle).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import fairq

ROOT = Path(fairq.__file__).parent

#: fairq's parts, lowest first: a module imports only from its own layer and those below.
LAYERS = [
    {"errors", "policy", "urls", "startup"},
    {"job", "results", "cancel", "figures", "recorded", "current"},
    {"contract"},
    {"model", "backends", "sim"},
    {"instrument", "reports"},
    {"app"},
    {"worker"},
    {"relay"},
    {"integrations", "web", "demo"},
    {"cli", "__main__"},
]
LAYER = {part: n for n, parts in enumerate(LAYERS) for part in parts}
#: The stores' own packages: the worker and the App know only the contract (and the steps).
STORES = ("fairq.backends.sqlite", "fairq.backends.redis", "fairq.backends.postgres")


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = ["fairq", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def run_at_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                yield from run_at_import(node.body)
            yield from run_at_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                yield from run_at_import(block)


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The fairq modules (and the packages above them) that importing ``name`` runs."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in run_at_import(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                above = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*above, base] if base else above)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in targets:
            parts = target.split(".")
            for n in range(2, len(parts) + 1):  # fairq.a, fairq.a.b, …: each runs on import
                step = ".".join(parts[:n])
                if step in known and not (name == step or name.startswith(step + ".")):
                    found.add(step)
    return found


GRAPH = {name: imported(name, path, modules()) for name, path in modules().items()}


def part(name: str) -> str:
    return name.split(".")[1]


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [
        f"{name} -> {dep}"
        for name, deps in GRAPH.items()
        if name != "fairq"
        for dep in deps
        if LAYER[part(dep)] > LAYER[part(name)]
    ]
    assert upward == []


def test_the_worker_and_the_app_know_no_store_of_their_own() -> None:
    found = [
        f"{name} -> {dep}"
        for name, deps in GRAPH.items()
        if name != "fairq" and part(name) in ("worker", "app")
        for dep in deps
        if dep.startswith(STORES)
    ]
    assert found == []


def test_the_import_graph_has_no_cycle() -> None:
    """Tarjan's strongly connected components: any of more than one module is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for dep in GRAPH[name]:
            if dep not in index:
                visit(dep)
                low[name] = min(low[name], low[dep])
            elif dep in stack:
                low[name] = min(low[name], index[dep])
        if low[name] == index[name]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == name:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in GRAPH:
        if name not in index:
            visit(name)
    assert cycles == []


def test_the_graph_reads_the_imports_it_should() -> None:
    """The checks above see real edges (a test that cannot fail is a defect)."""
    assert "fairq.contract" in GRAPH["fairq.backends.sqlite.backend"]
    assert "fairq.app" in GRAPH["fairq.worker.worker"]
    assert "fairq.app.periodic" not in GRAPH["fairq.reports.periodic"]  # TYPE_CHECKING only


def test_rq_s_worker_loading_the_queue_class_does_not_import_fair_py_back() -> None:
    """``fair.py`` imports ``queue.py``: the package must not import it on the way to the
    queue class RQ's worker names (``fairq.integrations.rq.queue.FairQueue``)."""
    code = (
        "import sys, fairq.integrations.rq.queue as q; "
        "print(q.FairQueue.__name__, 'fairq.integrations.rq.fair' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["FairQueue", "False"]
