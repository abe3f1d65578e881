"""Layers point one way (house style; issue #17): the import graph of ``analyzer/`` and
``reports/`` has no cycle, and the analyzer never imports ``reports`` — except the CLI, the
composition root that hands the renderers to the analysis (``reports.render``).

The graph is read from the source with `ast`, not by importing: every ``import`` and
``from … import`` anywhere in a module (inside functions and ``if TYPE_CHECKING:`` too),
relative imports resolved against the module's package, ``from pkg import name`` counted
as an import of ``pkg.name`` when that is a module, else of ``pkg``. Only edges between
modules of the two packages count; a package's ``__init__`` is the module ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("analyzer", "reports")
#: the one analyzer module allowed to import ``reports``: it composes the two
COMPOSITION_ROOTS = frozenset({"analyzer.cli"})

# issue #17: the one-engine parser refactor removes these
KNOWN_PARSER_CYCLES: frozenset[frozenset[str]] = frozenset()


def module_name(path: Path, root: Path = ROOT) -> str:
    """``analyzer/parsers/iostat.py`` → ``analyzer.parsers.iostat``; a package's
    ``__init__.py`` is the package itself.

    >>> module_name(ROOT / "analyzer" / "parsers" / "__init__.py")
    'analyzer.parsers'
    """
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of `PACKAGES` under ``root``: name → file."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def _package_of(module: str, path: Path) -> str:
    """The package a relative import in ``module`` starts from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _resolve(target: str, modules: set[str]) -> str | None:
    """``target`` or its longest prefix that is one of ``modules`` (None: outside them)."""
    while target:
        if target in modules:
            return target
        target = target.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``module`` (file ``path``) imports, anywhere in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    targets: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(module, path).split(".")
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from pkg import mod` imports pkg.mod when it is one
                sub = f"{base}.{alias.name}" if base else alias.name
                targets.append(sub if sub in modules else base)
    found = {_resolve(t, modules) for t in targets}
    return {m for m in found if m is not None and m != module}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module → the modules it imports, over `PACKAGES` under ``root``."""
    files = source_modules(root)
    names = set(files)
    return {m: imports_of(m, p, names) for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative):
    each is a set of modules that import each other in a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def one_cycle(graph: dict[str, set[str]], members: frozenset[str]) -> list[str]:
    """A shortest import circle through the first of ``members`` (for the message)."""
    start = min(members)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child == start:
                return [*paths[node], start]
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    return sorted(members)


def _describe(graph: dict[str, set[str]], members: frozenset[str]) -> str:
    return f"{sorted(members)} (e.g. {' -> '.join(one_cycle(graph, members))})"


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_graph_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    pkg = tmp_path / "analyzer"
    (pkg / "sub").mkdir(parents=True)
    (tmp_path / "reports").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from reports import html\n")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("from ..a import f\nfrom .. import sub\n")
    (tmp_path / "reports" / "__init__.py").write_text("")
    (tmp_path / "reports" / "html.py").write_text("import analyzer.sub.b\n")
    g = import_graph(tmp_path)
    assert g["analyzer.a"] == {"reports.html"}
    assert g["analyzer.sub"] == {"analyzer.sub.b"}
    assert g["analyzer.sub.b"] == {"analyzer.a", "analyzer.sub"}
    assert g["reports.html"] == {"analyzer.sub.b"}
    # a -> reports.html -> sub.b -> a and sub <-> sub.b share sub.b: one component
    assert cycles(g) == [
        frozenset({"analyzer.a", "analyzer.sub", "analyzer.sub.b", "reports.html"})
    ]


def test_analyzer_never_imports_reports_except_the_cli(graph: dict[str, set[str]]) -> None:
    wrong = {
        f"{m} imports {', '.join(sorted(t for t in targets if t.split('.')[0] == 'reports'))}"
        for m, targets in graph.items()
        if m.split(".")[0] == "analyzer"
        and m not in COMPOSITION_ROOTS
        and any(t.split(".")[0] == "reports" for t in targets)
    }
    assert not wrong, "the analyzer must return data; the CLI calls the renderers:\n" + "\n".join(
        sorted(wrong)
    )


def test_no_import_cycles_outside_the_known_parser_ones(graph: dict[str, set[str]]) -> None:
    new = [c for c in cycles(graph) if c not in KNOWN_PARSER_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(sorted(_describe(graph, c) for c in new))


def test_known_parser_cycles_still_exist_so_the_list_only_shrinks(
    graph: dict[str, set[str]],
) -> None:
    now = set(cycles(graph))
    gone = [c for c in KNOWN_PARSER_CYCLES if c not in now]
    assert not gone, "no longer a cycle (remove it from KNOWN_PARSER_CYCLES): " + "; ".join(
        str(sorted(c)) for c in gone
    )
    outside = [
        c for c in KNOWN_PARSER_CYCLES if not all(m.startswith("analyzer.parsers.") for m in c)
    ]
    assert not outside, f"KNOWN_PARSER_CYCLES may hold only parser modules: {outside}"


def private_uses(module: str, path: Path, modules: set[str]) -> set[str]:
    """The private names (``_x``) of *other* modules of ``modules`` that ``module`` uses:
    ``from m import _x`` and ``m._x`` where ``m`` is a name bound by an import of one of
    ``modules``. A private module itself (``_read``, a package's shared engine) may be
    imported; its public names are its interface."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bound: dict[str, str] = {}  # local name -> module it refers to
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(module, path).split(".")
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    bound[alias.asname or alias.name] = sub
                elif base in modules and base != module and _private(alias.name):
                    used.add(f"{base}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.asname:
                    bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and _private(node.attr)
            and bound[node.value.id] != module
        ):
            used.add(f"{bound[node.value.id]}.{node.attr}")
    return used


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_private_uses_are_found_in_both_forms(tmp_path: Path) -> None:
    pkg = tmp_path / "analyzer"
    pkg.mkdir()
    (tmp_path / "reports").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("_x = 1\ny = 2\n")
    (pkg / "b.py").write_text("from analyzer.a import _x, y\nfrom analyzer import a as m\nm._z\n")
    files = source_modules(tmp_path)
    assert private_uses("analyzer.b", files["analyzer.b"], set(files)) == {
        "analyzer.a._x",
        "analyzer.a._z",
    }


#: issue #17: what the per-tool rewrites still have to remove (the list only shrinks)
KNOWN_PRIVATE_USES: frozenset[str] = frozenset()


def test_no_module_uses_another_modules_private_names() -> None:
    files = source_modules()
    names = set(files)
    found = {
        f"{m} uses {u}"
        for m, p in files.items()
        for u in private_uses(m, p, names)
        if u not in KNOWN_PRIVATE_USES
    }
    assert not found, "private names are a module's own:\n" + "\n".join(sorted(found))
