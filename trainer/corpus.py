"""Built-in corpora made from text every Python installation already has, so nothing is downloaded.

`stdlib-docs` is the standard library's docstrings (modules, classes, functions): real English prose about
code, from one-liners to multi-page essays, so lengths vary the way real pre-training documents do.
Identical docstrings (inherited or copied methods) are kept once. A fixed 2% of documents, chosen by a hash of
their text so that no held-out text also appears in training, form a held-out split the trainer never reads.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import sys
import sysconfig
from pathlib import Path

BUILTIN_PREFIX = "builtin:"
HELDOUT_PERCENT = 2
_SKIPPED_PACKAGES = {"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo"}
_MIN_CHARS = 20


def builtin_names() -> list[str]:
    return sorted(_CORPORA)


def builtin_documents(name: str, split: str = "train") -> list[str]:
    """The documents of a built-in corpus split ("train" or "heldout"), in a fixed order."""
    if name not in _CORPORA:
        raise ValueError(f"unknown built-in corpus {name!r}; available: {', '.join(builtin_names())}")
    if split not in ("train", "heldout"):
        raise ValueError(f"unknown split {split!r}; built-in corpora have 'train' and 'heldout'")
    unique = dict.fromkeys(text for _, text in _CORPORA[name]())  # first occurrence keeps the order
    return [text for text in unique if _is_heldout(text) == (split == "heldout")]


def builtin_fingerprint(name: str) -> str:
    """Changes when the corpus would change: another Python, whose version and build name the standard library it
    reads (hashing the library's files instead cost about a second of every launch)."""
    return hashlib.sha256(f"{name}:{_stdlib_root()}:{sys.version}".encode()).hexdigest()[:16]


def _is_heldout(text: str) -> bool:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 100 < HELDOUT_PERCENT


def _stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _wanted(relative: Path) -> bool:
    return not _SKIPPED_PACKAGES.intersection(relative.parts)


@functools.cache  # parsing the standard library takes seconds; tokenizer and tokenization both read it
def _stdlib_docstrings() -> list[tuple[str, str]]:
    root = _stdlib_root()
    documents = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if not _wanted(relative):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join(relative.with_suffix("").parts)
        documents.extend(_docstrings(tree, module))
    return documents


def _docstrings(node: ast.AST, qualname: str) -> list[tuple[str, str]]:
    found = []
    text = ast.get_docstring(node, clean=True)
    if text and len(text) >= _MIN_CHARS:
        found.append((qualname, text))
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found.extend(_docstrings(child, f"{qualname}.{child.name}"))
    return found


_CORPORA = {"stdlib-docs": _stdlib_docstrings}
