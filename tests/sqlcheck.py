"""A static check of the rule "values are parameters" (docs/security.md, analyzer/sql.py).

`check(files)` finds every string built like SQL — an f-string, ``%``, ``+`` or
``.format`` whose constant text holds SQL keywords, pastes a part between single quotes
(``'{x}'``), or is assigned to / passed as an SQL-ish name (``sql``, ``where``, ``cond``…)
— and judges every part pasted into it. A part is accepted only when it cannot carry a
value from a bundle:

- a constant, a module constant (``UPPER_CASE``), an item or attribute of an accepted
  name, arithmetic on accepted parts, ``int()``/``len()``/``float()``/``round()`` of
  anything, a comparison;
- a call of the one identifier-quoting helper ``ident()``;
- a local name whose every assignment (``=``, ``+=``, ``.append()``…) in its scope is
  accepted, a loop or comprehension variable over an accepted iterable;
- a function parameter whose argument is accepted at every call of the function found in
  the project (its default when a call leaves it out);
- a call of a project function whose every ``return`` is accepted, an instance of a
  project class built from accepted arguments;
- an entry of `REVIEWED`: read and found to be our own SQL text (each with the reason).

Anything else — an attribute of a row, ``str(x)`` of a value, ``ts.isoformat()``, a
parameter of a method or callback — is a violation: bind the value as a parameter or
quote the identifier with ``ident()``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

SQL_WORDS = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|FROM|COPY|ATTACH|DETACH|CREATE|DROP|DESCRIBE|"
    r"PRAGMA|ALTER|VALUES|JOIN|UNION|INSTALL|LOAD|EXPORT|IMPORT|CALL)\b"
)
#: names that hold SQL text or a fragment of it, as variables or keyword arguments
SQL_NAMES = {"sql", "q", "query", "where", "cond", "order", "having", "select"}
SAFE_CALLS = {"int", "len", "float", "round", "ident", "bool"}
#: calls whose result is made of their arguments' values
PASSTHROUGH = {"sorted", "list", "tuple", "reversed", "enumerate", "zip", "range", "next",
               "min", "max", "set", "frozenset", "dict", "fromkeys", "str"}  # fmt: skip
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add"}
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPS = (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)

#: (path suffix, function, name) -> why its values are our own SQL text
REVIEWED: dict[tuple[str, str, str], str] = {
    (
        "reports/queries.py",
        "frame",
        "where",
    ): "fragments of reports/: each is checked here where it is built (SQL_NAMES)",
    ("reports/queries.py", "frame", "order"): "as where",
    ("reports/queries.py", "records", "where"): "as where",
    ("reports/queries.py", "records", "order"): "as where",
    ("reports/panels.py", "sql", "self"): "Src objects: SQL text declared in reports/panels_*.py",
    # DDL printed for the user's Spark/Trino (docs/scale.md), never executed here
    ("analyzer/fleet_sql.py", "ddl", "name"): "a table folder matching SAFE_NAME (tables())",
    ("analyzer/fleet_sql.py", "ddl", "path"): "the user's --location or dataset path",
    ("analyzer/fleet_sql.py", "ddl", "uri"): "the user's --location or dataset path",
    ("analyzer/fleet_sql.py", "ddl", "cols"): "column names of our own dataset's Parquet schema",
}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    part: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.part!r} pasted into SQL"


# -- which strings are SQL -------------------------------------------------------------------
def _constant_text(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _constant_text(node.left) + _constant_text(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _constant_text(node.func.value) if node.func.attr == "format" else []
    return []


def _quotes_a_part(node: ast.AST) -> bool:
    """``f"... '{x}' ..."``: a part made into an SQL string literal."""
    if not isinstance(node, ast.JoinedStr):
        return False
    vals = node.values
    for i, v in enumerate(vals):
        if isinstance(v, ast.FormattedValue) and 0 < i < len(vals) - 1:
            before, after = vals[i - 1], vals[i + 1]
            if (
                isinstance(before, ast.Constant)
                and str(before.value).endswith("'")
                and isinstance(after, ast.Constant)
                and str(after.value).startswith("'")
            ):
                return True
    return False


def _is_build(node: ast.AST) -> bool:
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return bool(_constant_text(node))
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
    )


def _parts(node: ast.AST) -> list[ast.expr]:
    """What a construction pastes into its constant text."""
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        out: list[ast.expr] = []
        for side in (node.left, node.right):
            if isinstance(side, ast.Constant):
                continue
            if isinstance(side, ast.BinOp | ast.JoinedStr) and _constant_text(side):
                out += _parts(side)
            else:
                out.append(side)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return list(node.right.elts) if isinstance(node.right, ast.Tuple) else [node.right]
    if isinstance(node, ast.Call):
        return [*node.args, *(k.value for k in node.keywords)]
    return []


# -- one module ------------------------------------------------------------------------------
class Module:
    """One parsed file: parents, scopes, functions and imports."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.name = path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        self.tree = ast.parse(source)
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.functions: dict[str, ast.AST] = {}
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions[node.name] = node
        self.methods: dict[str, ast.AST] = {}  # method name -> def (names unique here)
        self.classes = {n.name for n in self.tree.body if isinstance(n, ast.ClassDef)}
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        self.methods[item.name] = None if item.name in self.methods else item
        self.imports: dict[str, tuple[str, str]] = {}  # alias -> (module, name)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.imports[a.asname or a.name] = (node.module, a.name)

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function, lambda or comprehension whose names ``node`` sees first."""
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (*_FUNCS, *_COMPS)):
                return node
        return self.tree

    def function_scope(self, node: ast.AST) -> ast.AST:
        """Like `scope_of`, skipping comprehensions (where ``:=`` binds)."""
        scope = self.scope_of(node)
        while isinstance(scope, _COMPS):
            scope = self.scope_of(scope)
        return scope

    def bindings(self, scope: ast.AST, name: str) -> list[tuple[str, ast.AST | None]]:
        """How ``name`` gets its values in ``scope``: ("value", expr), ("iter", expr) for
        loop and unpacking targets, ("param", None), ("other", None) for the rest."""
        out: list[tuple[str, ast.AST | None]] = []
        if isinstance(scope, _FUNCS):
            a = scope.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            if any(p is not None and p.arg == name for p in params):
                out.append(("param", None))
        for node in ast.walk(scope):
            if node is scope:
                continue
            if isinstance(node, ast.NamedExpr):
                if self.function_scope(node) is scope and node.target.id == name:
                    out.append(("value", node.value))
                continue
            if self.scope_of(node) is not scope:
                continue
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    out += _target_bindings(t, name, node.value)
                    if isinstance(t, ast.Subscript) and _binds(t.value, name):
                        out.append(("value", node.value))  # name[k] = v
            elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
                if isinstance(node.target, ast.Name) and node.target.id == name:
                    out.append(("value", node.value))
            elif isinstance(node, ast.For) and _binds(node.target, name):
                out.append(("iter", node.iter))
            elif (  # name.append(v), name.extend(v), name.update(v)...
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == name
                and node.func.attr in MUTATORS
            ):
                out += [("value", a) for a in [*node.args, *(k.value for k in node.keywords)]]
            elif isinstance(node, ast.With):
                for item in node.items:
                    if item.optional_vars is not None and _binds(item.optional_vars, name):
                        out.append(("other", None))
            elif isinstance(node, ast.ExceptHandler) and node.name == name:
                out.append(("other", None))
        return out


def _binds(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


def _target_bindings(
    target: ast.AST, name: str, value: ast.AST
) -> list[tuple[str, ast.AST | None]]:
    if isinstance(target, ast.Name):
        return [("value", value)] if target.id == name else []
    if isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            out = []
            for t, v in zip(target.elts, value.elts, strict=True):
                out += _target_bindings(t, name, v)
            return out
        return [("iter", value)] if _binds(target, name) else []  # unpacked: like iterating
    return []


def _is_constant_name(name: str) -> bool:
    bare = name.lstrip("_")
    return bool(bare) and bare.upper() == bare and any(c.isalpha() for c in bare)


# -- the project -----------------------------------------------------------------------------
class Project:
    """Every checked module, so that calls and call sites can be followed across files."""

    def __init__(self, files: dict[str, str]) -> None:
        self.modules = {m.name: m for m in (Module(p, s) for p, s in files.items())}
        self._busy: set[tuple[str, int, str]] = set()

    def violations(self) -> list[Violation]:
        out = []
        for mod in self.modules.values():
            for node in _constructions(mod.tree):
                scope = mod.scope_of(node)
                for part in _parts(node):
                    if not self.safe(mod, part, scope):
                        out.append(Violation(mod.path, part.lineno, ast.unparse(part)))
        return out

    def _guard(self, mod: Module, node: ast.AST, what: str) -> bool:
        """False (and marks it) the first time; True while the same judgement is open."""
        key = (mod.name, id(node), what)
        if key in self._busy:
            return True
        self._busy.add(key)
        return False

    def _release(self, mod: Module, node: ast.AST, what: str) -> None:
        self._busy.discard((mod.name, id(node), what))

    def safe(self, mod: Module, node: ast.AST, scope: ast.AST) -> bool:
        if isinstance(node, ast.Constant | ast.Compare):
            return True
        if isinstance(node, ast.FormattedValue):
            return self.safe(mod, node.value, scope)
        if isinstance(node, ast.JoinedStr):
            return all(self.safe(mod, v, scope) for v in node.values)
        if isinstance(node, ast.BinOp):
            return self.safe(mod, node.left, scope) and self.safe(mod, node.right, scope)
        if isinstance(node, ast.UnaryOp):
            return self.safe(mod, node.operand, scope)
        if isinstance(node, ast.IfExp):
            return self.safe(mod, node.body, scope) and self.safe(mod, node.orelse, scope)
        if isinstance(node, ast.BoolOp | ast.Tuple | ast.List | ast.Set):
            elts = node.values if isinstance(node, ast.BoolOp) else node.elts
            return all(self.safe(mod, e, scope) for e in elts)
        if isinstance(node, ast.Dict):
            return all(self.safe(mod, v, scope) for v in [*node.keys, *node.values] if v)
        if isinstance(node, ast.Starred):
            return self.safe(mod, node.value, scope)
        if isinstance(node, ast.Name):
            return self.safe_name(mod, node.id, scope)
        if isinstance(node, ast.Subscript | ast.Attribute):
            root = node
            while isinstance(root, ast.Subscript | ast.Attribute):
                root = root.value
            return isinstance(root, ast.Name) and self.safe_name(mod, root.id, scope)
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            return self.safe(mod, node.elt, node)  # variables judged where they are used
        if isinstance(node, ast.DictComp):
            return self.safe(mod, node.key, node) and self.safe(mod, node.value, node)
        if isinstance(node, ast.Call):
            return self._safe_call(mod, node, scope)
        return False

    def _safe_call(self, mod: Module, node: ast.Call, scope: ast.AST) -> bool:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in SAFE_CALLS:
            return True
        args = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(f, ast.Attribute):
            if f.attr == "join":  # "sep".join(parts)
                return self.safe(mod, f.value, scope) and all(
                    self.safe(mod, a, scope) for a in args
                )
            if f.attr in ("items", "keys", "values", "copy"):
                return self.safe(mod, f.value, scope)
            if f.attr == "get":  # mapping.get(key, default)
                return self.safe(mod, f.value, scope) and all(
                    self.safe(mod, a, scope) for a in node.args[1:]
                )
            if f.attr in ("fromkeys", "format"):  # CONSTANT.format(e=ident(x))
                return self.safe(mod, f.value, scope) and all(
                    self.safe(mod, a, scope) for a in args
                )
            method = mod.methods.get(f.attr)  # obj.method(...) of a class of this module
            return method is not None and self._safe_returns(mod, method)
        if name in PASSTHROUGH or self.is_class(mod, name):  # a record of accepted values
            return all(self.safe(mod, a, scope) for a in args)
        target = self.resolve(mod, name)
        return target is not None and self._safe_returns(*target)

    def is_class(self, mod: Module, name: str) -> bool:
        """``name`` is a class defined in the project (its instances hold their arguments)."""
        if name in mod.classes:
            return True
        src, orig = mod.imports.get(name, ("", ""))
        other = self.modules.get(src)
        return other is not None and orig in other.classes

    def resolve(self, mod: Module, name: str) -> tuple[Module, ast.AST] | None:
        """The project function that ``name`` calls in ``mod``."""
        if name in mod.functions:
            return mod, mod.functions[name]
        if name in mod.imports:
            src, orig = mod.imports[name]
            other = self.modules.get(src)
            if other is not None and orig in other.functions:
                return other, other.functions[orig]
        return None

    def _safe_returns(self, mod: Module, func: ast.AST) -> bool:
        if self._guard(mod, func, "<return>"):
            return True  # recursion: judged by its other returns
        try:
            returns = [
                n
                for n in ast.walk(func)
                if isinstance(n, ast.Return) and mod.function_scope(n) is func
            ]
            return bool(returns) and all(
                r.value is not None and self.safe(mod, r.value, func) for r in returns
            )
        finally:
            self._release(mod, func, "<return>")

    def _reviewed(self, mod: Module, scope: ast.AST, name: str) -> bool:
        func = getattr(scope, "name", "*")
        return any(mod.path.endswith(p) and f == func and n == name for p, f, n in REVIEWED)

    def safe_name(self, mod: Module, name: str, scope: ast.AST) -> bool:
        if _is_constant_name(name) or self._reviewed(mod, scope, name):
            return True
        if isinstance(scope, _COMPS):  # a comprehension's own variable: its iterable
            for g in scope.generators:
                if _binds(g.target, name):
                    return self.safe(mod, g.iter, mod.scope_of(scope))
            return self.safe_name(mod, name, mod.scope_of(scope))
        if self._guard(mod, scope, name):
            return True  # a cycle (x = x + ...): judged by its other assignments
        try:
            binds = mod.bindings(scope, name)
            if not binds:  # a closure's variable: the enclosing scope's
                return scope is not mod.tree and self.safe_name(mod, name, mod.scope_of(scope))
            for how, value in binds:
                if how == "param":
                    if not self._safe_param(mod, scope, name):
                        return False
                elif how == "other" or value is None or not self.safe(mod, value, scope):
                    return False
            return True
        finally:
            self._release(mod, scope, name)

    def _safe_param(self, mod: Module, func: ast.AST, name: str) -> bool:
        """Every call of ``func`` found in the project passes an accepted argument."""
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        if mod.functions.get(func.name) is not func:
            return False  # methods, nested functions, callbacks: call sites unknown
        calls = list(self._call_sites(mod, func.name))
        if not calls:
            return False
        a = func.args
        positional = [p.arg for p in [*a.posonlyargs, *a.args]]
        defaults = dict(
            zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)
        )
        defaults |= {p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d}
        for caller, call in calls:
            arg = _argument(call, positional, name)
            if arg is None:
                arg = defaults.get(name)
            if arg is None or not self.safe(caller, arg, caller.scope_of(call)):
                return False
        return True

    def _call_sites(self, mod: Module, fname: str) -> Iterable[tuple[Module, ast.Call]]:
        for other in self.modules.values():
            if other is mod:
                aliases = {fname}
            else:
                aliases = {k for k, v in other.imports.items() if v == (mod.name, fname)}
            if not aliases:
                continue
            for node in ast.walk(other.tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in aliases
                ):
                    yield other, node


def _argument(call: ast.Call, positional: list[str], name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
        if k.arg is None:
            return k.value  # **kwargs: judged as a whole
    if name in positional:
        i = positional.index(name)
        for j, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                return arg.value
            if j == i:
                return arg
    return None


def _constructions(tree: ast.AST) -> list[ast.AST]:
    """Outermost SQL-like string constructions (nested ones are judged as parts)."""
    positions: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id in SQL_NAMES for t in node.targets):
                positions.add(id(node.value))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            if isinstance(node.target, ast.Name) and node.target.id in SQL_NAMES:
                positions.add(id(node.value))
        elif isinstance(node, ast.Call):
            positions |= {id(k.value) for k in node.keywords if k.arg in SQL_NAMES}
    found: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        if _is_build(node) and (
            SQL_WORDS.search("".join(_constant_text(node)))
            or _quotes_a_part(node)
            or id(node) in positions
        ):
            found.append(node)
            for part in _parts(node):
                for child in ast.iter_child_nodes(part):
                    visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def check(files: dict[str, str]) -> list[Violation]:
    """Every part pasted into SQL text in ``files`` (path -> source) that may carry data."""
    return Project(files).violations()
