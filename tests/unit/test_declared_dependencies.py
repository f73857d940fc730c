"""Every workspace member declares what it imports, in its own pyproject.

uv installs the whole workspace into one environment, so a member that imports a package only
a sibling declares works there and breaks as soon as it is installed alone, or by pip from the
built wheels (a different resolver). The walk reads each member's source with ``ast``: every
absolute import that is not the standard library maps to the distributions that provide it
(``importlib.metadata.packages_distributions``, refined by file lists for namespace packages
such as ``opentelemetry``), one of which must be in ``[project.dependencies]``; a distribution
the member imports under ``except ImportError`` may be in an extra instead. ``longhaul.<x>``
must be the member ``longhaul-<x>``. Imports under ``if TYPE_CHECKING:`` never run and are skipped.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = sorted(p.parent for p in ROOT.glob("*/*/pyproject.toml") if (p.parent / "src").is_dir())
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


@dataclass(frozen=True)
class Import:
    module: str
    where: str
    optional: bool  # inside ``try:`` with an ``except ImportError``


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(k, ast.Name) and k.id in IMPORT_ERRORS for k in kinds):
            return True
    return False


def _imports(node: ast.AST, where: str, optional: bool = False) -> Iterator[Import]:
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        for child in node.orelse:
            yield from _imports(child, where, optional)
    elif isinstance(node, ast.Import):
        for alias in node.names:
            yield Import(alias.name, f"{where}:{node.lineno}", optional)
    elif isinstance(node, ast.ImportFrom):
        if node.level == 0 and node.module:
            # `from opentelemetry import trace` imports the submodule opentelemetry.trace
            for alias in node.names:
                yield Import(f"{node.module}.{alias.name}", f"{where}:{node.lineno}", optional)
    elif isinstance(node, ast.Try):
        guarded = optional or _catches_import_error(node)
        for child in node.body:
            yield from _imports(child, where, guarded)
        for after in [*node.handlers, *node.orelse, *node.finalbody]:
            yield from _imports(after, where, optional)
    else:
        for inner in ast.iter_child_nodes(node):
            yield from _imports(inner, where, optional)


def member_imports(member: Path) -> list[Import]:
    found: list[Import] = []
    for path in sorted((member / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        found += _imports(tree, str(path.relative_to(ROOT)))
    return [i for i in found if i.module.split(".")[0] not in sys.stdlib_module_names]


@cache
def _top_level() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


@cache
def _files_index() -> dict[tuple[str, ...], frozenset[str]]:
    """Module path prefix -> distributions whose files lie under it (for namespace packages)."""
    index: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for file in dist.files or ():
            parts = (*file.parts[:-1], file.parts[-1].split(".")[0])
            for k in range(1, len(parts) + 1):
                index[parts[:k]].add(name)
    return {key: frozenset(names) for key, names in index.items()}


@cache
def providers(module: str) -> frozenset[str]:
    """The distributions that provide ``module``, as precisely as the installed files allow."""
    parts = module.split(".")
    if parts[0] == "longhaul":
        return frozenset({f"longhaul-{parts[1]}"})
    top = _top_level().get(parts[0], [])
    if len(top) <= 1:
        return frozenset(canonicalize_name(d) for d in top)
    index = _files_index()
    for k in range(len(parts), 0, -1):
        if tuple(parts[:k]) in index:
            return index[tuple(parts[:k])]
    return frozenset()


def declared(member: Path) -> tuple[set[str], set[str]]:
    project = tomllib.loads((member / "pyproject.toml").read_text())["project"]
    required = {
        str(canonicalize_name(Requirement(r).name)) for r in project.get("dependencies", [])
    }
    extras = {
        str(canonicalize_name(Requirement(r).name))
        for reqs in project.get("optional-dependencies", {}).values()
        for r in reqs
    }
    return required, extras


def _name(member: Path) -> str:
    return str(tomllib.loads((member / "pyproject.toml").read_text())["project"]["name"])


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: m.name)
def test_a_member_declares_every_package_it_imports(member: Path) -> None:
    own = _name(member)
    required, extras = declared(member)
    imports = [(imp, providers(imp.module)) for imp in member_imports(member)]
    # once one import of a distribution is guarded, the member runs without it: its other
    # imports of it sit behind that guard (the browser tools import playwright again later)
    optional = {d for imp, dists in imports if imp.optional for d in dists}
    missing = []
    for imp, dists in imports:
        if dists == {own}:
            continue
        allowed = required | extras if dists <= optional else required
        if not dists & allowed:
            kind = "dependencies or an extra" if dists <= optional else "dependencies"
            wanted = sorted(dists) or ["<not installed>"]
            missing.append(f"{imp.where}: {imp.module} needs one of {wanted} in {kind}")
    assert not missing, f"{own} imports what its pyproject does not declare:\n" + "\n".join(missing)


def test_the_walk_sees_guarded_lazy_and_namespace_imports() -> None:
    """The walker itself: a guarded import is optional, a type-only one is skipped, and
    opentelemetry's namespace resolves to the one distribution behind each submodule."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import typeonly\n"
        "def f():\n    try:\n        import maybe\n"
        "    except ImportError:\n        import fallback\n"
        "from opentelemetry import trace\n"
    )
    found = {(i.module, i.optional) for i in _imports(tree, "x.py")}
    assert found == {
        ("typing.TYPE_CHECKING", False),
        ("maybe", True),
        ("fallback", False),
        ("opentelemetry.trace", False),
    }
    assert providers("opentelemetry.trace") == {"opentelemetry-api"}
    assert providers("opentelemetry.sdk.trace") == {"opentelemetry-sdk"}
    assert providers("yaml.safe_load") == {"pyyaml"}


def _closure(member: Path) -> Iterator[tuple[str, Requirement]]:
    """(who requires it, requirement) over the installed closure of a member's dependencies."""
    required, _ = declared(member)
    seen: set[str] = set()
    todo = [(name, frozenset[str]()) for name in required]
    while todo:
        name, wanted_extras = todo.pop()
        if name in seen or name.startswith("longhaul"):
            continue
        seen.add(name)
        envs = [{"extra": e} for e in wanted_extras] or [{"extra": ""}]
        for req in map(Requirement, metadata.requires(name) or ()):
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                yield name, req
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))


def _extra_requirements(dist: str, extra: str) -> Iterator[str]:
    for need in map(Requirement, metadata.requires(dist) or ()):
        if need.marker and "extra" in str(need.marker) and need.marker.evaluate({"extra": extra}):
            yield canonicalize_name(need.name)


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: m.name)
def test_an_extra_only_a_normalising_pip_finds_is_declared_directly(member: Path) -> None:
    """justext asks for ``lxml[html_clean]``; lxml provides ``html-clean``. uv and pip ≥ 23.3
    treat them as one (PEP 685), the pip that ``python -m venv`` brings with Python 3.11 does
    not: it installs lxml without lxml_html_clean and trafilatura dies importing
    ``lxml.html.clean``. Whatever such an extra would add, the member declares itself."""
    required, _ = declared(member)
    unmet = []
    for parent, req in _closure(member):
        provided = metadata.metadata(req.name).get_all("Provides-Extra") or []
        for extra in req.extras - set(provided):
            unmet += [
                f"{parent} wants {req.name}[{extra}], that is {need}"
                for need in _extra_requirements(req.name, extra)
                if need not in required
            ]
    assert not unmet, f"{_name(member)} must declare: " + "; ".join(unmet)
