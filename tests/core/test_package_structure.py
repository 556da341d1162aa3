"""The package's import graph, read from the source with ast (every import statement, also those
inside functions): no two modules import each other through a loop, core imports no family and
holds only what at least two parts of the package use, no family imports another except the
analysis library, nothing but the command-line tools imports the tools, and the installed
package never imports the development helpers (devtools)."""
import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fairseq_ctx"
FAMILIES = ("analysis", "context", "embedding", "multisource")
SHARED_LIBRARY = "analysis"  # the representation library every family may use


def module_names() -> Dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported_names(path: Path, module: str) -> List[str]:
    """Every module name an import statement of ``path`` names (``from A import b``: ``A.b`` and ``A``)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names += [f"{base}.{alias.name}" for alias in node.names] + [base]
    return names


def import_graph() -> Dict[str, Set[str]]:
    """Module → the package's modules it imports (a name is the longest module it starts with)."""
    modules = module_names()
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported in imported_names(path, name):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                graph[name].add(imported)
    return graph


def part(module: str) -> str:
    """``core``, a family, ``cli``, or ``root`` (the package's own ``__init__`` and version)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else "root"


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph() -> Dict[str, Set[str]]:
    return import_graph()


def edges(graph: Dict[str, Set[str]]) -> List[Tuple[str, str]]:
    return sorted((a, b) for a, targets in graph.items() for b in targets)


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_core_imports_no_family_and_no_tool(graph):
    assert [(a, b) for a, b in edges(graph) if part(a) == "core" and part(b) not in ("core", "root")] == []


def test_no_family_imports_another_except_the_analysis_library(graph):
    crossing = [(a, b) for a, b in edges(graph)
                if part(a) in FAMILIES and part(b) in FAMILIES and part(a) != part(b) and part(b) != SHARED_LIBRARY]
    assert crossing == []
    assert [(a, b) for a, b in edges(graph) if part(a) == SHARED_LIBRARY and part(b) in FAMILIES and b != a
            and part(b) != SHARED_LIBRARY] == []


def test_only_the_tools_import_the_tools(graph):
    assert [(a, b) for a, b in edges(graph) if part(b) == "cli" and part(a) != "cli"] == []


def test_the_package_never_imports_the_development_helpers():
    modules = module_names()
    assert [name for name, path in modules.items()
            if any(n == "devtools" or n.startswith("devtools.") for n in imported_names(path, name))] == []


def test_every_core_module_serves_two_parts_of_the_package(graph):
    """Users of a core module: the parts (families, cli, the package's registration) that import it,
    directly or through other core modules. One user only means it belongs in that part."""
    users: Dict[str, Set[str]] = {name: set() for name in graph if part(name) == "core"}
    for name in graph:
        if part(name) == "core":
            continue
        seen, pending = set(), [b for b in graph[name] if part(b) == "core"]
        while pending:
            core_module = pending.pop()
            if core_module not in seen:
                seen.add(core_module)
                pending += [b for b in graph[core_module] if part(b) == "core"]
        for core_module in seen:
            users[core_module].add(part(name))
    single = {name: sorted(parts) for name, parts in users.items()
              if name != "fairseq_ctx.core" and len(parts) < 2 and "root" not in parts}
    assert single == {}


def test_the_graph_reader_sees_the_imports_it_guards():
    """The checks above read real edges: a known family-to-core import, a known cross into the
    analysis library, and a loop made on purpose is found."""
    graph = import_graph()
    assert "fairseq_ctx.core.model_family" in graph["fairseq_ctx.context.context_translation_task"]
    assert "fairseq_ctx.analysis.representations" in graph["fairseq_ctx.context.hmce_representations"]
    looped = {**graph, "fairseq_ctx.core.progress": graph["fairseq_ctx.core.progress"] | {"fairseq_ctx.cli.options"},
              "fairseq_ctx.cli.options": graph["fairseq_ctx.cli.options"] | {"fairseq_ctx.core.progress"}}
    assert ["fairseq_ctx.cli.options", "fairseq_ctx.core.progress"] in cycles(looped)
