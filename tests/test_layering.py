"""Dependencies point one way: every import of meshpilot's own modules, read with ast (at module level, inside
functions and under TYPE_CHECKING), goes down the rooms that docs/ARCHITECTURE.md lists ("## Layers"), no modules
import each other in a circle, and an import inside a function says in a comment why it waits (import time)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("trainer", "evalsuite", "agent", "tui", "bench")
# Where an import inside a function must say why it waits: everywhere.
REASONED = PACKAGES
# Where an import of another library (torch, transformers, the standard library) inside a function must say so too.
REASONED_LIBRARIES = PACKAGES


@dataclass(frozen=True)
class Missing:
    source: str
    target: str  # a module path of the project that no file of this tree holds
    line: int


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module of the project
    line: int
    in_function: bool
    reason: bool  # a comment on its line, on a line of the same import block, or right above the block


def find_modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Module name -> file, for every .py file under the packages (a package is its __init__.py)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def read_imports(name: str, path: Path, known: dict[str, Path], missing: list[Missing] | None = None) -> list[Import]:
    """The project modules that `name` imports, wherever in the file it imports them; an import of a project path
    that no file of this tree holds (an old module path, which another checkout's editable install would quietly
    serve) goes to `missing`."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    in_function = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                   for n in ast.walk(f)}  # fmt: skip
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
            wanted = targets
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            wanted = [base] + [f"{base}.{a.name}" for a in node.names if _is_package(known.get(base)) and
                               a.name not in _defined(known[base])]  # fmt: skip
        else:
            continue
        if missing is not None:
            top = {module.split(".")[0] for module in known}
            missing += [Missing(name, w, node.lineno) for w in wanted if w.split(".")[0] in top and w not in known]
        for target in dict.fromkeys(targets):
            while target and target not in known:  # `import a.b.c` of a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                inside = id(node) in in_function
                found.append(Import(name, target, node.lineno, inside, inside and _has_reason(lines, node)))
    return found


def library_imports_in_functions(path: Path, known: dict[str, Path]) -> list[tuple[int, str, bool]]:
    """(line, module, whether a comment says why) of each import inside a function of a module outside the
    project (absolute: a relative import is the project's)."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    top = {module.split(".")[0] for module in known}
    found = []
    for function in [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]:
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module or ""]
            else:
                continue
            found += [(node.lineno, m, _has_reason(lines, node)) for m in modules if m.split(".")[0] not in top]
    return sorted(set(found))


def _is_package(path: Path | None) -> bool:
    return path is not None and path.name == "__init__.py"


def _defined(path: Path) -> set[str]:
    """The names a package's __init__.py binds at module level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _has_reason(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's lines, on the lines of the imports right above it, or on the line above those."""
    first = node.lineno - 1
    while first > 0 and re.match(r"\s*(from \S+ )?import ", lines[first - 1]):
        first -= 1
    block = lines[max(first - 1, 0) : node.end_lineno]
    return any("#" in line for line in block)


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The modules that import each other in a circle (Tarjan's strongly connected components of two or more)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def read_layers(architecture: str) -> list[list[str]]:
    """The rooms of docs/ARCHITECTURE.md's "## Layers" block as module names, top line first; rooms on one line are
    side by side. The block names files and folders (trainer/config.py, trainer/rank/)."""
    section = architecture.split("## Layers", 1)[1]
    block = section.split("```", 2)[1]
    rooms = [[_module(room) for room in line.split("#", 1)[0].split()] for line in block.splitlines()]
    return [line for line in rooms if line]


def _module(room: str) -> str:
    return room.removesuffix("/").removesuffix(".py").replace("/", ".")


def room_of(module: str, layers: list[list[str]]) -> tuple[int, str] | None:
    """(height, room) of the room holding `module` (the longest that names it or a package above it); height 0 is
    the bottom line."""
    best = None
    for height, rooms in enumerate(reversed(layers)):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and (best is None or len(room) > len(best[1])):
                best = (height, room)
    return best


def against_order(imports: list[Import], layers: list[list[str]]) -> list[str]:
    """Imports from a room to a room beside it or above it."""
    wrong = []
    for found in imports:
        source, target = room_of(found.source, layers), room_of(found.target, layers)
        if source is None or target is None or source[1] == target[1]:
            continue
        if target[0] >= source[0]:
            where = "beside" if target[0] == source[0] else "above"
            wrong.append(f"{found.source}:{found.line} imports {found.target}, {where} it")
    return wrong


def check(
    root: Path,
    packages: tuple[str, ...],
    layers: list[list[str]],
    reasoned: tuple[str, ...] = (),
    libraries: tuple[str, ...] = (),
) -> list[str]:
    """Every problem of the tree under `root`: circles, imports against the layers, in-function imports without a
    reason (of the project's modules in the `reasoned` packages, of other libraries in the `libraries` ones)."""
    known = find_modules(root, packages)
    missing: list[Missing] = []
    imports = [found for name, path in known.items() for found in read_imports(name, path, known, missing)]
    problems = [f"{m.source}:{m.line} imports {m.target}, which no file of this tree holds" for m in missing]
    problems += [f"circle: {' <-> '.join(circle)}" for circle in cycles({(i.source, i.target) for i in imports})]
    problems += against_order(imports, layers)
    problems += [
        f"{i.source}:{i.line} imports {i.target} inside a function without a comment saying why"
        for i in imports
        if i.in_function and not i.reason and i.source.split(".")[0] in reasoned
    ]
    problems += [
        f"{name}:{line} imports {module} inside a function without a comment saying why"
        for name, path in known.items()
        if name.split(".")[0] in libraries
        for line, module, reason in library_imports_in_functions(path, known)
        if not reason
    ]
    return problems


def test_meshpilot_imports_point_one_way():
    layers = read_layers((REPO / "docs" / "ARCHITECTURE.md").read_text())
    assert check(REPO, PACKAGES, layers, REASONED, REASONED_LIBRARIES) == []


def test_every_trainer_module_has_a_room():
    layers = read_layers((REPO / "docs" / "ARCHITECTURE.md").read_text())
    homeless = [name for name in find_modules(REPO, ("trainer",)) if name != "trainer" and not room_of(name, layers)]
    assert homeless == []


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "planted" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


PLANTED_LAYERS = [["planted.top"], ["planted.low"]]


def test_a_planted_circle_fails(tmp_path):
    """An import inside a function closes the circle: it counts as much as one at module level."""
    _plant(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "from planted.low import b\n",
        "low/b.py": "def f():\n    # imported here: no reason excuses a circle\n    from planted.low.a import f\n",
        "top.py": "from planted.low.a import x\n",
    })  # fmt: skip
    assert check(tmp_path, ("planted",), PLANTED_LAYERS) == ["circle: planted.low.a <-> planted.low.b"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("from planted import top\n", "planted.low.a:1 imports planted.top, above it"),
        ("def f():\n    from ..top import g  # why\n", "planted.low.a:2 imports planted.top, above it"),
        ("def f():\n    import planted.side.c\n", "planted.low.a:2 imports planted.side.c, beside it"),
    ],
    ids=["module-level", "relative-in-function", "beside"],
)
def test_a_planted_import_against_the_order_fails(tmp_path, text, problem):
    _plant(tmp_path, {"__init__.py": "", "top.py": "", "low/__init__.py": "", "low/a.py": text, "side/c.py": ""})
    layers = [["planted.top"], ["planted.low", "planted.side"]]
    assert problem in check(tmp_path, ("planted",), layers)


def test_a_planted_import_of_a_path_no_file_holds_fails(tmp_path):
    """An old module path (moved since) fails here, rather than load from another checkout's editable install."""
    _plant(tmp_path, {
        "__init__.py": "", "top.py": "from planted import gone\n", "low/__init__.py": "X = 1\n",
        "low/a.py": "from planted.low import X\n\n\ndef f():\n    # why\n    import planted.old\n",
    })  # fmt: skip
    assert check(tmp_path, ("planted",), PLANTED_LAYERS) == [
        "planted.low.a:6 imports planted.old, which no file of this tree holds",
        "planted.top:1 imports planted.gone, which no file of this tree holds",
    ]


def test_an_import_inside_a_function_needs_its_reason(tmp_path):
    _plant(tmp_path, {
        "__init__.py": "",
        "low.py": "",
        "top.py": "def f():\n    from planted.low import x\n\n\ndef g():\n    # why\n    from planted import low\n",
    })  # fmt: skip
    assert check(tmp_path, ("planted",), PLANTED_LAYERS, ("planted",)) == [
        "planted.top:2 imports planted.low inside a function without a comment saying why"
    ]


def test_an_import_of_another_library_inside_a_function_needs_its_reason(tmp_path):
    _plant(tmp_path, {
        "__init__.py": "",
        "low.py": "import json\n\n\ndef f():\n    import torch.nn\n\n\ndef g():\n    # why\n    from os import path\n",
        "top.py": "def f():\n    from . import low\n",  # the project's own, relative: the other check's
    })  # fmt: skip
    assert check(tmp_path, ("planted",), PLANTED_LAYERS, (), ("planted",)) == [
        "planted.low:5 imports torch.nn inside a function without a comment saying why"
    ]
