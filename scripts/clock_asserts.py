"""Find assertions on elapsed time in tests that run beside others (not `serial`).

    .venv/bin/python scripts/clock_asserts.py [PATH ...]   (default: tests/)

The parallel phase runs on a machine whose cores are busy: a test there waits on conditions
with timeouts and never compares a duration with a bound. This reads each test module's syntax
tree and follows clock readings (`time.time`, `time.monotonic`, `time.perf_counter` and their
`_ns` forms, `loop.time()`) through assignments, and through the module's own functions that
read a clock (their results are durations too), into `assert` statements and `pytest.approx`.
A test function or module marked `pytest.mark.serial` is left out: that phase has the machine
to itself. So is an assertion whose bounds are both clock readings taken around what it checks
(a shown age between the stamp's and the command's end), a slow machine widening them: it says
so on its line with `# clock-ok: WHY`. Only the module's own functions are followed, not
helpers imported from other modules. Prints `path:line: test: the assertion` per finding,
exits 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

CLOCKS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns"}


# calls whose result is made of their arguments: a duration stays one through them; any other
# call given a clock reading (`watch.readings(key, time.time())`) answers something else
CARRIERS = {
    "abs", "round", "float", "int", "min", "max", "sum", "sorted", "list", "tuple", "median",
    "mean", "quantiles", "fmean", "percentile", "diff", "zip", "enumerate", "asyncio.run",
}  # fmt: skip


def called_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return "asyncio.run" if ast.unparse(func) == "asyncio.run" else func.attr
    return ""


def carries(node: ast.AST, tainted: set[str], timed: set[str]) -> bool:
    """Whether the expression's value comes from a clock: a clock read here, a call of one of
    `timed` (the module's functions that time), or a name in `tainted`, through arithmetic,
    comparisons, containers and CARRIERS."""
    if isinstance(node, ast.Name):
        return node.id in tainted
    if isinstance(node, ast.Lambda):
        return False
    if isinstance(node, ast.Call):
        name = called_name(node)
        if isinstance(node.func, ast.Attribute) and name in CLOCKS and not node.args:
            return True  # time.monotonic(), loop.time()
        if isinstance(node.func, ast.Name) and (name in timed or name in CLOCKS):
            return True  # a helper that times, or `from time import monotonic`
        if name not in CARRIERS:
            return False
        parts: list[ast.AST] = [*node.args, *(k.value for k in node.keywords)]
        return any(carries(part, tainted, timed) for part in parts)
    return any(carries(child, tainted, timed) for child in ast.iter_child_nodes(node))


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def targets(node: ast.AST) -> set[str]:
    """The names an assignment, a loop or a `with … as` binds."""
    if isinstance(node, ast.Assign):
        return set().union(*(names_in(target) for target in node.targets))
    if isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For | ast.comprehension):
        return names_in(node.target)
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return names_in(node.optional_vars)
    return set()


def source_of(node: ast.AST) -> ast.AST | None:
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        return node.value
    if isinstance(node, ast.For | ast.comprehension):
        return node.iter
    if isinstance(node, ast.withitem):
        return node.context_expr
    return None


def tainted_names(function: ast.AST, timed: set[str]) -> set[str]:
    """Names in `function` that hold a clock reading or something computed from one."""
    tainted: set[str] = set()
    changed = True
    while changed:  # to a fixed point: `gap = end - start` after `end = monotonic()`
        changed = False
        for node in ast.walk(function):
            value = source_of(node)
            if value is None:
                continue
            if carries(value, tainted, timed):
                new = targets(node) - tainted
                if new:
                    tainted |= new
                    changed = True
    return tainted


def marked_serial(decorators: Iterable[ast.expr]) -> bool:
    return any("serial" in ast.unparse(d) for d in decorators)


def module_serial(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and "pytestmark" in names_in(node):
            return "serial" in ast.unparse(node.value)
    return False


def timed_functions(tree: ast.Module) -> set[str]:
    """The module's functions whose result comes from a clock (to a fixed point)."""
    functions = {
        n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    timed: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, function in functions.items():
            if name in timed or name.startswith("test_"):
                continue
            tainted = tainted_names(function, timed)
            returned = [n.value for n in ast.walk(function) if isinstance(n, ast.Return)]
            if any(v is not None and carries(v, tainted, timed) for v in returned):
                timed.add(name)
                changed = True
    return timed


def excused(lines: list[str], node: ast.Assert) -> bool:
    """`# clock-ok: WHY` (a reason given) on one of the assertion's lines."""
    end = node.end_lineno or node.lineno
    return any("# clock-ok: " in line for line in lines[node.lineno - 1 : end])


def findings(path: Path) -> Iterator[str]:
    text = path.read_text()
    tree = ast.parse(text, filename=str(path))
    lines = text.splitlines()
    if module_serial(tree):
        return
    timed = timed_functions(tree)
    for test in tree.body:
        if not isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not test.name.startswith("test_") or marked_serial(test.decorator_list):
            continue
        tainted = tainted_names(test, timed)
        for node in ast.walk(test):
            if (
                isinstance(node, ast.Assert)
                and carries(node.test, tainted, timed)
                and not excused(lines, node)
            ):
                yield f"{path}:{node.lineno}: {test.name}: {ast.unparse(node.test)[:120]}"


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("tests")]
    files = sorted(p for root in roots for p in ([root] if root.is_file() else root.rglob("*.py")))
    found = [line for path in files for line in findings(path)]
    for line in found:
        print(line)
    if found:
        print(
            f"{len(found)} assertion(s) on elapsed time outside the serial phase: wait on a "
            "condition instead, or mark the test `pytest.mark.serial`",
            file=sys.stderr,
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
