"""The package layout: imports point only down the layers, no module imports itself back through others,
and modules stay small enough to hold one idea. ``calibration`` (the torch engine) is one layer of its own: it
drives the twin's core, cost models and simulation, and only the analysis, fitting and user-facing layers may
use it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("twin", "calibration")

# Bottom to top. A module may import from its own layer or any layer below it, never above.
LAYERS = [
    ("errors", "yaml_input", "json_input"),
    ("core",),
    ("hardware",),
    ("cost",),
    ("workload",),
    ("spec_decode",),
    ("scenario", "disaggregation", "slo_statistics", "slo_section"),
    ("results",),
    ("sim",),
    ("deploy",),           # deployments: one server is a cluster of one; P/D pools
    ("calibration",),
    ("analysis", "fitting"),
    ("plan",),
    ("cli", "dashboard"),
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}

# Modules allowed past the size limit, with the reason.
LONG_MODULES: dict[str, str] = {}
MAX_LINES = 400


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every twin module ``path`` imports, at any depth (lazy imports included), outside TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t not in PACKAGES:
                found.add(t)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] == "calibration":
        return LAYER_OF["calibration"]
    return LAYER_OF.get(parts[1]) if len(parts) > 1 else None


def test_every_subpackage_has_a_layer():
    missing = sorted({m.split(".")[1] for m in _modules() if m not in PACKAGES and _layer(m) is None})
    assert missing == [], f"give these a layer in LAYERS: {missing}"


def test_imports_point_only_down():
    upward = []
    for module, targets in _graph().items():
        if module in PACKAGES:
            continue
        for t in targets:
            if _layer(t) > _layer(module):
                upward.append(f"{module} -> {t}")
    assert upward == []


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert cycles == []


def test_the_serving_core_imports_only_the_core():
    graph = _graph()
    outside = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith("twin.core")
                     for t in ts if not t.startswith("twin.core") and t != "twin.errors")
    assert outside == []


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "twin").rglob("*.py")) +
                         sorted(p for p in (ROOT / "calibration").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_stay_small(path: Path):
    rel = str(path.relative_to(ROOT))
    lines = len(path.read_text().splitlines())
    if rel in LONG_MODULES:
        return
    assert lines <= MAX_LINES, f"{rel} has {lines} lines (limit {MAX_LINES}; split it or say why in LONG_MODULES)"
