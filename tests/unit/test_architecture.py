"""The layout's rules, checked on the code's own imports (see docs/content/architecture.md).

* the pipeline language (`pipeline_stages`) never imports the server (`service`);
* parsing a pipeline imports no Spark (nor pandas/pyarrow): validation answers in a second;
* imports point down the layers, and no modules import each other in a loop;
* an import inside a function must buy something: it keeps a heavy dependency (Spark, pandas,
  a client library) out of a module that does not otherwise load it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline_stages", "service")
#: Third-party packages whose import costs enough to justify a lazy import.
HEAVY = frozenset(
    {"pyspark", "pandas", "pyarrow", "numpy", "confluent_kafka", "pymongo", "fastapi", "uvicorn"}
)

#: Layers from the top down; a module may import its own layer or any layer below it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("service", ("service",)),
    ("registry", ("pipeline_stages",)),
    ("stages", ()),  # pipeline_stages.<stage>: every public module of the package
    ("engine", ("pipeline_stages._engine",)),
    ("enrichment", ("pipeline_stages._enrichment",)),
    ("windowing.spark", ("pipeline_stages._windowing.spark",)),
    ("windowing.batch", ("pipeline_stages._windowing.batch",)),
    ("windowing.runtime", ("pipeline_stages._windowing.runtime",)),
    ("windowing", ("pipeline_stages._windowing",)),
    ("connectors", ("pipeline_stages._connectors",)),
    ("stream", ("pipeline_stages._stream",)),
    ("mql", ("pipeline_stages._mql",)),
    ("base", ("pipeline_stages._documents", "pipeline_stages._base", "pipeline_stages._entry",
              "pipeline_stages._problems")),
)  # fmt: skip


@dataclass(frozen=True)
class Import:
    """One import statement's target, as the importing module sees it."""

    source: str
    target: str
    line: int
    in_function: bool
    in_try: bool


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


MODULES = _modules()


def _walk(node: ast.AST, *, function: bool, guarded: bool) -> Iterator[tuple[ast.AST, bool, bool]]:
    for child in ast.iter_child_nodes(node):
        in_function = function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        type_only = isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
        if type_only:
            continue  # imports for the type checker only: never run
        in_try = guarded or isinstance(child, ast.Try)
        yield child, in_function, in_try
        yield from _walk(child, function=in_function, guarded=in_try)


def _imports(module: str) -> list[Import]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = []
    for node, in_function, in_try in _walk(tree, function=False, guarded=False):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                target = full if full in MODULES else node.module
                found.append(Import(module, target, node.lineno, in_function, in_try))
        elif isinstance(node, ast.Import):
            found.extend(
                Import(module, alias.name, node.lineno, in_function, in_try) for alias in node.names
            )
    return found


IMPORTS = {module: _imports(module) for module in MODULES}
PROJECT_EDGES = [
    i for found in IMPORTS.values() for i in found if i.target.split(".")[0] in PACKAGES
]


def layer_of(module: str) -> int:
    """The layer's index, 0 at the top."""
    if module.count(".") == 1 and module.startswith("pipeline_stages.") and "._" not in module:
        return 2
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > len(best[1])
            ):
                best = (index, prefix)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_the_language_never_imports_the_server() -> None:
    wrong = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in PROJECT_EDGES
        if i.source.startswith("pipeline_stages") and i.target.startswith("service")
    ]
    assert wrong == []


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{i.source}:{i.line} ({LAYERS[layer_of(i.source)][0]}) imports {i.target} "
        f"({LAYERS[layer_of(i.target)][0]})"
        for i in PROJECT_EDGES
        if i.target in MODULES and layer_of(i.target) < layer_of(i.source)
    ]
    assert upward == []


def _cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for i in PROJECT_EDGES:
        if i.target in MODULES and i.target != i.source:
            graph[i.source].add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles() -> None:
    assert _cycles() == []


_HEAVY_MEMO: dict[str, frozenset[str]] = {}


def _heavy(module: str, visiting: frozenset[str] = frozenset()) -> frozenset[str]:
    """The heavy packages a module loads at import time, through its top-level imports."""
    root = module.split(".")[0]
    if root in HEAVY:
        return frozenset({root})
    if module not in MODULES or module in visiting:
        return frozenset()
    if module in _HEAVY_MEMO:
        return _HEAVY_MEMO[module]
    parents = [".".join(module.split(".")[:n]) for n in range(1, module.count(".") + 1)]
    loaded: frozenset[str] = frozenset()
    for target in {*(i.target for i in IMPORTS[module] if not i.in_function), *parents}:
        loaded |= _heavy(target, visiting | {module})
    _HEAVY_MEMO[module] = loaded
    return loaded


def test_a_lazy_import_keeps_something_heavy_out() -> None:
    pointless = {
        f"{i.source}:{i.line} imports {i.target} inside a function for no reason"
        for found in IMPORTS.values()
        for i in found
        if i.in_function
        and not i.in_try
        and i.target.split(".")[0] in (*PACKAGES, *HEAVY)
        and not (_heavy(i.target) - _heavy(i.source))
    }
    assert sorted(pointless) == []


@pytest.mark.parametrize("heavy", ["pyspark", "pandas", "pyarrow"])
def test_parsing_a_pipeline_imports_no_spark(heavy: str) -> None:
    script = f"""
import sys
from pipeline_stages import check_options, lint_pipeline, parse_pipeline
parsed = parse_pipeline([
    {{"$source": {{"connectionName": "events", "timeField": {{"$toDate": "$t"}}}}}},
    {{"$match": {{"a": {{"$gt": 1}}}}}},
    {{"$addFields": {{"b": {{"$add": ["$a", 1]}}}}}},
    {{"$hoppingWindow": {{"interval": {{"size": 10, "unit": "second"}},
        "hopSize": {{"size": 5, "unit": "second"}},
        "pipeline": [{{"$group": {{"_id": "$k", "n": {{"$sum": 1}}}}}}, {{"$sort": {{"n": -1}}}}]}}}},
    {{"$merge": {{"into": {{"connectionName": "local", "db": "d", "coll": "c"}}}}}},
])
check_options(parsed, has_dlq=True)
lint_pipeline(parsed, has_dlq=True)
loaded = sorted(m for m in sys.modules if m.split(".")[0] == {heavy!r})
assert not loaded, loaded
"""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
