"""The layering of docs/architecture.md, checked on every module's imports (``ast``, so function-level
and ``TYPE_CHECKING`` imports count too):

    binlog_parser  <-  binlake  <-  spark_jobs  <-  orchestration  <-  dags  <-  binlake_testing  <-  binlake_cli

(``binlake_testing`` is the test/demo tooling and ``binlake_cli`` the console script: applications on
top that may use every layer; nothing below imports them.)

A module may import its own layer and the layers below it, never one above; third-party packages
belong to a layer too (``pyspark``/``delta`` are Spark glue, ``airflow`` is orchestration), and
``binlog_parser`` uses the standard library and zstandard only. There is no import cycle.

Today's known violations are listed in :data:`ALLOWED_UPWARD` / :data:`ALLOWED_CYCLES` (stage 2 of
issue 11): an entry that no longer happens fails the test too, so the lists can only shrink.

Inside the two middle layers the code is grouped by pipeline stage (issue 42): :data:`STAGES` gives
each stage its homes, every module of ``binlake`` and ``spark_jobs`` has exactly one stage, a module
named after a stage lives in that stage's home, and :data:`STAGE_IMPORTS` says which stage may use
which. Every exception class is under its package's root (:data:`ERROR_ROOTS`).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("binlog_parser", "binlake", "spark_jobs", "orchestration", "dags", "binlake_testing", "binlake_cli")

#: Layer rank by module prefix (longest prefix wins).
LAYERS: dict[str, int] = {
    "binlog_parser": 0,
    "binlake": 1,
    "spark_jobs": 2,
    "pyspark": 2, "delta": 2, "py4j": 2,
    "orchestration": 3,
    "airflow": 3,
    "dags": 4,
    "binlake_testing": 5,
    "binlake_cli": 6,
}
#: What binlog_parser may import besides itself and the standard library.
PARSER_THIRD_PARTY = {"zstandard"}

#: Upward imports allowed: none (issue 11 emptied the list; keep it empty).
ALLOWED_UPWARD: set[tuple[str, str]] = set()
# stage 2 of issue 11 (binlog_parser/rows is issues 13's and 16's this round): import cycles known
# today, each as the sorted tuple of its modules.
ALLOWED_CYCLES: set[tuple[str, ...]] = set()


#: Longest function allowed (issue 11), in lines from ``def`` to its last line.
MAX_FUNCTION_LINES = 80
#: Where functions are measured: the packages, the tests and the benchmarks.
MEASURED = (*PACKAGES, "tests", "bench")
#: Generated lookup tables, exempt from the length limit.
GENERATED = {"binlog_parser/rows/charset_tables.py"}
# stage 2 of issue 11: functions over the limit today, as (file, qualified name); an entry that is
# no longer too long fails the test too, so the list can only shrink.
ALLOWED_LONG_FUNCTIONS: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")) if (ROOT / pkg).is_dir() else ():
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _bound_names(path: Path) -> set[str]:
    """The names a module binds at top level (what ``from module import name`` can mean besides
    a submodule)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def _imports(path: Path, module: str, known: dict[str, Path]) -> Iterator[str]:
    """Every module ``path`` imports: ``from a import b`` counts as ``a.b`` when that is a module,
    or when package ``a`` does not define ``b`` (a submodule such as a compiled extension)."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                package_init = known.get(base)
                if sub in known or (package_init is not None and package_init.name == "__init__.py"
                                    and alias.name not in _bound_names(package_init)):
                    yield sub
                else:
                    yield base


def _layer(name: str) -> int | None:
    best, rank = "", None
    for prefix, r in LAYERS.items():
        if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > len(best):
            best, rank = prefix, r
    return rank


def _top(name: str) -> str:
    """``pyspark.sql.functions`` -> ``pyspark``; internal modules stay whole."""
    return name if name.split(".")[0] in PACKAGES else name.split(".")[0]


def _only_the_allowed(found: AbstractSet[Any], allowed: AbstractSet[Any], allowed_name: str, problem: str) -> None:
    """Nothing ``found`` beyond the known exceptions (``allowed``, a list that can only shrink), and
    none of them fixed without leaving the list."""
    assert sorted(found - allowed) == [], problem
    assert sorted(allowed - found) == [], f"fixed: remove these from {allowed_name}"


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {_top(i) for i in _imports(p, m, mods)} for m, p in mods.items()}


def test_no_module_imports_a_layer_above_it() -> None:
    found: set[tuple[str, str]] = set()
    for module, imported in _graph().items():
        own = _layer(module)
        assert own is not None, module
        for name in imported:
            rank = _layer(name)
            if rank is not None and rank > own:
                found.add((module, name))
    _only_the_allowed(found, ALLOWED_UPWARD, "ALLOWED_UPWARD", "upward imports (see docs/architecture.md)")


def test_binlog_parser_uses_the_standard_library_and_zstandard_only() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    bad = {(m, i) for m, imported in _graph().items() if m.split(".")[0] == "binlog_parser"
           for i in imported if i.split(".")[0] not in stdlib | PARSER_THIRD_PARTY | {"binlog_parser"}}
    assert sorted(bad) == []


def _cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: set[tuple[str, ...]] = set()
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.add(tuple(sorted(component)))
    return out


def test_no_import_cycle() -> None:
    found = _cycles(_graph())
    _only_the_allowed(found, ALLOWED_CYCLES, "ALLOWED_CYCLES", "import cycles")


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {("a", "b", "c")}
    assert _cycles({"a": {"b"}, "b": set()}) == set()


def long_functions(source: str, filename: str, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Qualified name -> length of every function (methods and nested ones too) over ``limit`` lines."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    out[prefix + child.name] = length
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source, filename), "")
    return out


def _python_files() -> Iterator[tuple[str, Path]]:
    for top in MEASURED:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else ():
            rel = path.relative_to(ROOT).as_posix()
            if "fixtures" not in path.relative_to(ROOT).parts and rel not in GENERATED:
                yield rel, path


def test_no_function_over_80_lines() -> None:
    found = {(rel, name): length for rel, path in _python_files()
             for name, length in long_functions(path.read_text(), rel).items()}
    assert sorted(f"{rel} {name}: {n} lines" for (rel, name), n in found.items()
                  if (rel, name) not in ALLOWED_LONG_FUNCTIONS) == [], "split these functions"
    assert sorted(ALLOWED_LONG_FUNCTIONS - set(found)) == [], "fixed: remove these from ALLOWED_LONG_FUNCTIONS"


def test_the_length_check_measures_nested_functions_and_methods() -> None:
    def lines(indent: int, n: int) -> str:
        return "".join(" " * indent + f"x{i} = {i}\n" for i in range(n))

    source = ("def short():\n" + lines(4, 79)  # 80 lines: allowed
              + "class C:\n    def m(self):\n        def inner():\n" + lines(12, 80)  # inner: 81 lines
              + lines(8, 1))  # m: 83 lines
    assert long_functions(source, "<test>") == {"C.m": 83, "C.m.inner": 81}


#: The stage homes inside ``binlake`` (domain, no Spark) and ``spark_jobs`` (the Spark side of each
#: stage), as module prefixes (longest prefix wins). ``core`` is what every stage shares (config,
#: errors, run ids, the typed step results, the Spark session); ``runner`` runs the steps in order
#: and so may use every stage. ``orchestration``, ``dags`` and ``binlake_cli`` are whole layers on
#: top and are not split by stage.
STAGES: dict[str, tuple[str, ...]] = {
    "core": ("binlake", "binlake.config", "binlake.errors", "binlake.run_ids", "binlake.step_results",
             "spark_jobs", "spark_jobs.errors", "spark_jobs.session", "spark_jobs.progress",
             "spark_jobs.spark_logs"),
    "runner": ("binlake.runs", "spark_jobs.steps", "spark_jobs.__main__"),
    "lake": ("binlake.lake", "spark_jobs.lake", "spark_jobs.schemas", "spark_jobs.delta_retry", "spark_jobs.catalog"),
    "discovery": ("binlake.discovery",),
    "ingest": ("binlake.ingest", "spark_jobs.ingest"),
    "reconcile": ("binlake.reconcile",),
    "gold": ("binlake.gold", "spark_jobs.gold"),
    "sql": ("binlake.sql", "spark_jobs.sql_engine"),
    "archive": ("binlake.archive",),
    "history": ("binlake.history", "spark_jobs.history"),
    "maintenance": ("binlake.lake.maintenance", "spark_jobs.maintenance"),
}
#: Which other stages a stage may import. The lake (table registry, storage, Delta helpers, leases)
#: is under every stage; ``core`` reads the registry (config checks table names against it); gold
#: and sql read the lake, never ingest's internals; ingest reads discovery's file list and
#: reconcile's GTID-set text.
STAGE_IMPORTS: dict[str, set[str]] = {
    "core": {"lake"},
    "lake": {"core"},
    "discovery": {"core", "lake"},
    "ingest": {"core", "lake", "discovery", "reconcile"},
    "reconcile": {"core", "lake", "discovery"},
    "gold": {"core", "lake"},
    "sql": {"core", "lake"},
    "archive": {"core", "lake", "discovery"},
    "history": {"core", "lake", "gold", "reconcile", "sql"},
    "maintenance": {"core", "lake"},
    "runner": set(STAGES),
}
#: A module whose name (any part below the package) starts with one of these words belongs to that
#: stage: no ``gold_*.py`` or ``sql_*.py`` outside the gold and sql homes.
STAGE_WORDS: dict[str, str] = {
    "gold": "gold", "sql": "sql", "reconcil": "reconcile", "coverage": "reconcile", "archiv": "archive",
    "discover": "discovery", "ingest": "ingest", "delta": "lake", "lease": "lake", "storage": "lake",
    "maintenance": "maintenance",
}
#: Names that carry a stage word for another reason, with the reason.
STAGE_WORD_EXCEPTIONS: dict[str, str] = {
    "binlake.lake.sql_text": "the Spark SQL text of the writers' predicates, not the sql stage",
}
STAGED_PACKAGES = ("binlake", "spark_jobs")


def stage_of(module: str) -> str | None:
    """The stage whose longest prefix covers ``module`` (None: it has no home)."""
    best, stage = "", None
    for name, prefixes in STAGES.items():
        for prefix in prefixes:
            # a package itself ("binlake") is its ``__init__`` only, not everything below it
            below = "." in prefix and module.startswith(prefix + ".")
            if (module == prefix or below) and len(prefix) > len(best):
                best, stage = prefix, name
    return stage


def _staged_modules() -> list[str]:
    return sorted(m for m in _modules() if m.split(".")[0] in STAGED_PACKAGES)


def test_every_module_has_one_stage_home() -> None:
    assert [m for m in _staged_modules() if stage_of(m) is None] == [], "give these a stage in STAGES"
    declared = [p for prefixes in STAGES.values() for p in prefixes]
    assert sorted(p for p in set(declared) if declared.count(p) > 1) == [], "a prefix in two stages"


def misplaced_by_name(modules: list[str]) -> list[str]:
    """Modules named after a stage (``gold_plan``, ``sql_engine``) that live outside its home."""
    out = []
    for module in modules:
        if module in STAGE_WORD_EXCEPTIONS:
            continue
        for part in module.split(".")[1:]:
            word = next((w for w in STAGE_WORDS if part.startswith(w)), None)
            if word is not None and stage_of(module) != STAGE_WORDS[word]:
                out.append(f"{module}: named after {STAGE_WORDS[word]}, lives in {stage_of(module)}")
    return out


def test_modules_named_after_a_stage_live_in_its_home() -> None:
    assert misplaced_by_name(_staged_modules()) == []


def test_a_stage_imports_only_the_stages_it_may() -> None:
    found = []
    for module, imported in _graph().items():
        own = stage_of(module)
        if module.split(".")[0] not in STAGED_PACKAGES or own is None:
            continue
        for name in sorted(imported):
            other = stage_of(name) if name.split(".")[0] in STAGED_PACKAGES else None
            if other is not None and other != own and other not in STAGE_IMPORTS[own]:
                found.append(f"{module} ({own}) imports {name} ({other})")
    assert found == [], "see STAGE_IMPORTS and docs/architecture.md"


def test_the_stage_rules_catch_the_flat_layout() -> None:
    flat = ["binlake.gold_plan", "binlake.sql_fast", "binlake.reconcile_job", "spark_jobs.gold_inputs"]
    assert [m for m in flat if stage_of(m) is None] == ["binlake.gold_plan", "binlake.sql_fast",
                                                        "binlake.reconcile_job", "spark_jobs.gold_inputs"]
    assert misplaced_by_name(["spark_jobs.ingest.gold_tables"]) == [
        "spark_jobs.ingest.gold_tables: named after gold, lives in ingest"]


#: The root every exception class of a package must be under (by name, resolved over the tree).
ERROR_ROOTS: dict[str, str] = {
    "binlog_parser": "BinlogError",
    "binlake": "BinlakeError", "spark_jobs": "BinlakeError", "orchestration": "BinlakeError",
    "dags": "BinlakeError", "binlake_testing": "BinlakeError", "binlake_cli": "BinlakeError",
}
# issue 42: exception classes not yet under their package's root, as (file, class); an entry that
# is fixed fails the test too, so the set can only shrink.
ALLOWED_ROOTLESS_ERRORS: set[tuple[str, str]] = set()


def _class_bases() -> dict[tuple[str, str], list[str]]:
    """(file, class) -> the last name of each base, for every class of the packages."""
    out: dict[tuple[str, str], list[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")) if (ROOT / pkg).is_dir() else ():
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                if isinstance(node, ast.ClassDef):
                    out[(rel, node.name)] = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
    return out


def rootless_errors(classes: dict[tuple[str, str], list[str]]) -> set[tuple[str, str]]:
    """Exception classes (not warnings, not exits: a ``SystemExit`` subclass such as
    ``BinlakeTaskFailed`` ends an Airflow task on purpose) whose bases never reach their package's
    root."""
    import builtins

    by_name: dict[str, list[str]] = {}
    for (_, name), bases in classes.items():
        by_name.setdefault(name, []).extend(bases)

    def ancestors(name: str) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            for base in by_name.get(todo.pop(), []):
                if base not in seen:
                    seen.add(base)
                    todo.append(base)
        return seen

    def builtin(name: str, kind: type) -> bool:
        value = getattr(builtins, name, None)
        return isinstance(value, type) and issubclass(value, kind)

    out = set()
    for (rel, name), _ in classes.items():
        up = ancestors(name)
        root = ERROR_ROOTS[rel.split("/")[0]]
        if (any(builtin(b, Exception) for b in up) and not any(builtin(b, Warning) for b in up)
                and name != root and root not in up):
            out.add((rel, name))
    return out


def test_every_exception_is_under_its_package_root() -> None:
    found = rootless_errors(_class_bases())
    _only_the_allowed(found, ALLOWED_ROOTLESS_ERRORS, "ALLOWED_ROOTLESS_ERRORS",
                      "derive these from their root (ERROR_ROOTS)")


def test_the_root_check_follows_bases_through_the_tree() -> None:
    classes = {("binlake/errors.py", "BinlakeError"): ["Exception"], ("binlake/a.py", "A"): ["BinlakeError"],
               ("binlake/b.py", "B"): ["A", "ValueError"], ("binlake/c.py", "C"): ["ValueError"],
               ("binlake/d.py", "D"): ["UserWarning"], ("spark_jobs/e.py", "E"): ["C"]}
    assert rootless_errors(classes) == {("binlake/c.py", "C"), ("spark_jobs/e.py", "E")}
