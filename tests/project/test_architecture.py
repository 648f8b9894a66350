"""The architecture, enforced (docs/architecture.md): the layers, no import cycles, lazy imports
only for heavy runtimes, and the few packages that re-export names (``__all__``), each name
with a user.

An AST check over the source folders, so it needs no import-linter and imports nothing it
checks. The import graph has one node per module (``wai_dispatch.<folder>.…``); relative
imports are resolved; ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module, else to ``pkg``; imports under ``if TYPE_CHECKING:`` are no runtime edge and are left
out. Imports inside functions are edges too (they run), and are listed apart for the
lazy-import rule.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("dispatch", "setfacts", "codec", "paths", "service", "cli", "tools", "conformance")
PREFIX = "wai_dispatch"


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module, wai_dispatch.…
    target: str  # the imported module: a wai_dispatch module, or a third-party/stdlib name
    line: int
    lazy: bool  # inside a function body


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PREFIX, *parts])


def _sources() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[_module_name(path)] = path
    return found


SOURCES = _sources()
MODULES = frozenset(SOURCES) | {PREFIX}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, package: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _internal(name: str) -> str:
    """The longest known module that ``name`` names (``a.b.C`` -> ``a.b``)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: list[Import] = []

    def add(target: str, node: ast.stmt, lazy: bool) -> None:
        if target.split(".")[0] == PREFIX:
            target = _internal(target)
        out.append(Import(module, target, node.lineno, lazy))

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:  # the `else:` of `if TYPE_CHECKING:` does run
                visit(child, lazy)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, lazy)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, package, node)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in MODULES else base, node, lazy)
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return out


IMPORTS = {module: _imports(module, path) for module, path in SOURCES.items()}


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in SOURCES}
    for module, imports in IMPORTS.items():
        for imp in imports:
            if imp.target in SOURCES and imp.target != module:
                graph[module].add(imp.target)
    return graph


GRAPH = _edges()


# --- the layers ---------------------------------------------------------------------------

# Each module belongs to the layer of its longest matching prefix. A layer may import itself
# and the layers it lists (the same table as docs/architecture.md's "What may import what").
LOW = ("dispatch", "setfacts", "codec", "paths", "service.decoding", "service.settings")
ALLOWED: dict[str, tuple[str, ...]] = {
    "dispatch": (),  # the pure core: the standard library only (test_dispatch_is_stdlib_only)
    # what a path adapter reads about a set (its facts, the decode's limits): nothing of ours
    "setfacts": (),
    "codec": ("dispatch", "setfacts"),
    # the adapters read a set's facts, never the codec (test_paths_import_no_codec)
    "paths": ("dispatch", "setfacts"),
    "service.decoding": ("dispatch", "setfacts", "codec", "paths"),  # the decoding library
    # the process's settings, read once at the edge (the CLI, serve's factory)
    "service.settings": ("dispatch", "setfacts", "codec", "paths", "service.decoding"),
    "service.governance": ("dispatch",),  # pure policy, judge and run reports
    "service.store": (
        "dispatch",
        "setfacts",
        "codec",
        "paths",
        "service.decoding",
        "service.governance",
    ),
    # the use cases below HTTP (the decode: parse, prepare, admit, decode, record)
    "service.usecase": (*LOW, "service.governance", "service.store"),
    "service.http": (*LOW, "service.governance", "service.store", "service.usecase"),
    "service.web": (
        *LOW,
        "service.governance",
        "service.store",
        "service.usecase",
        "service.http",
    ),
    # the composition root: builds the application from http's routes and web's mounts
    "service.http.app": (
        *LOW,
        "service.governance",
        "service.store",
        "service.usecase",
        "service.http",
        "service.web",
    ),
    # the Ray Serve deployment: the same composition root's app, as a replica of a fleet
    # (`serve --ray` hands Ray its builder as an import string, as `serve` hands uvicorn the
    # app's)
    "service.rayserve": (
        *LOW,
        "service.governance",
        "service.store",
        "service.usecase",
        "service.http",
        "service.http.app",
    ),
    # the command line and the tools: the decoding library, the store and governance, each
    # other, never an HTTP module (test_cli_and_tools_import_no_http_module)
    "cli": (*LOW, "service.governance", "service.store", "service.usecase", "tools"),
    "tools": (*LOW, "service.governance", "service.store", "service.usecase", "cli"),
    "service": (),  # service/__init__.py: the folder's docstring, nothing more
    "conformance": (),  # data helpers (importlib.resources): importable from every layer
}
ANYWHERE = ("conformance",)


def layer_of(module: str) -> str:
    name = module.removeprefix(PREFIX + ".")
    matches = [layer for layer in ALLOWED if name == layer or name.startswith(layer + ".")]
    assert matches, f"{module}: in no layer of ALLOWED"
    return max(matches, key=len)


def test_every_module_is_in_a_layer() -> None:
    for module in SOURCES:
        layer_of(module)


# The one registry of error codes (tools/error_registry.py) lists every layer's error classes,
# and it and the doc it writes (tools/errors_doc.py) the HTTP layer's statuses, so they import
# the error modules of the layers above the tools too: those, and nothing else of those layers.
REGISTRY = (f"{PREFIX}.tools.error_registry", f"{PREFIX}.tools.errors_doc")
CODE_LEAVES = frozenset(
    {
        f"{PREFIX}.service.http.errors",
        f"{PREFIX}.service.web.errors",
        f"{PREFIX}.service.rayserve.plan",
    }
)


def test_layers() -> None:
    """A module imports only its own layer, the layers below it that ALLOWED lists, and the
    conformance data helpers."""
    wrong = []
    for module, imports in IMPORTS.items():
        mine = layer_of(module)
        for imp in imports:
            if imp.target not in SOURCES:
                continue
            if module in REGISTRY and imp.target in CODE_LEAVES:
                continue
            if module == PROFILER:  # the route profiler's server (PROFILER, below)
                continue
            theirs = layer_of(imp.target)
            if theirs == mine or theirs in ALLOWED[mine] or theirs in ANYWHERE:
                continue
            wrong.append(f"{module}:{imp.line} ({mine}) imports {imp.target} ({theirs})")
    assert not wrong, "imports across the layers:\n" + "\n".join(wrong)


def test_paths_import_no_codec() -> None:
    """A path adapter needs the facts of a set, not the codec: no module of ``paths`` imports
    ``codec`` (at module level or in a function); what it reads of a set is ``setfacts``'."""
    codec = f"{PREFIX}.codec"
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for module in SOURCES
        if layer_of(module) == "paths"
        for imp in IMPORTS[module]
        if imp.target == codec or imp.target.startswith(codec + ".")
    ]
    assert not wrong, "a path adapter imports the codec:\n" + "\n".join(wrong)
    assert "codec" not in ALLOWED["paths"]


def _third_party(module: str) -> list[Import]:
    return [imp for imp in IMPORTS[module] if imp.target.split(".")[0] != PREFIX]


def test_dispatch_is_stdlib_only() -> None:
    """The pure core imports the standard library only."""
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for module in SOURCES
        if layer_of(module) == "dispatch"
        for imp in _third_party(module)
        if imp.target.split(".")[0] not in sys.stdlib_module_names
    ]
    assert not wrong, "the pure core imports outside the standard library:\n" + "\n".join(wrong)


HTTP = ("fastapi", "starlette", "uvicorn")
HTTP_MODULES = (f"{PREFIX}.service.http", f"{PREFIX}.service.web")
# The one exception: `wai-dispatch serve` starts the service, so cli/serve.py imports uvicorn
# and hands it the app as an import string ("wai_dispatch.service.http.app:create_app"); it
# imports no module of the service's HTTP layer, and no other command loads uvicorn.
# tools/_service.py does the same for the tools that drive a running service (the dashboard
# bench, the page's browser check).
SERVE_EXCEPTION = {(f"{PREFIX}.cli.serve", "uvicorn"), (f"{PREFIX}.tools._service", "uvicorn")}
# And the route profiler's server (tools/route_clock.py, `bench service --route`'s child process,
# imported by nothing): it wraps the HTTP layer's functions in timers, so it imports them, and
# runs them on uvicorn.
PROFILER = f"{PREFIX}.tools.route_clock"


def _is_http(target: str) -> bool:
    return target.split(".")[0] in HTTP or any(
        target == name or target.startswith(name + ".") for name in HTTP_MODULES
    )


def test_cli_and_tools_import_no_http_module() -> None:
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for module in SOURCES
        if layer_of(module) in ("cli", "tools")
        for imp in IMPORTS[module]
        if _is_http(imp.target)
        and (module, imp.target.split(".")[0]) not in SERVE_EXCEPTION
        and module != PROFILER
        and not (module in REGISTRY and imp.target in CODE_LEAVES)
    ]
    assert not wrong, "the command line or a tool imports an HTTP module:\n" + "\n".join(wrong)


def test_decoding_library_imports_no_web_framework_or_database() -> None:
    banned = ("fastapi", "starlette", "uvicorn", "sqlalchemy")
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for module in SOURCES
        if layer_of(module) in LOW
        for imp in _third_party(module)
        if imp.target.split(".")[0] in banned
    ]
    assert not wrong, "the decoding library imports a web framework:\n" + "\n".join(wrong)


def test_use_cases_import_no_web_framework() -> None:
    """The use cases sit below HTTP: the CLI runs them as the service does."""
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for module in SOURCES
        if layer_of(module) == "service.usecase"
        for imp in IMPORTS[module]
        if _is_http(imp.target)
    ]
    assert not wrong, "a use case imports a web framework:\n" + "\n".join(wrong)


def test_the_web_layers_error_modules_are_leaves() -> None:
    """The HTTP layer's and the page's error modules import the core's kinds at most (and
    FastAPI's request, for the error body): the registry lists them without loading a layer."""
    leaves = [m for m in CODE_LEAVES if m.endswith(".errors")]
    wrong = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for module in leaves
        for imp in IMPORTS[module]
        if imp.target.startswith(PREFIX) and imp.target != f"{PREFIX}.dispatch.errors"
    ]
    assert not wrong, "an error module imports more than dispatch.errors:\n" + "\n".join(wrong)


def test_the_core_holds_no_http_status() -> None:
    """HTTP statuses are the HTTP layer's (service/http/errors.py): no module of dispatch/
    names a status (an integer 100–599, or a name with "status" in it)."""
    wrong = []
    modules = [m for m in SOURCES if layer_of(m) == "dispatch"]
    for module in modules:
        tree = ast.parse(SOURCES[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            value = node.value if isinstance(node, ast.Constant) else None
            if type(value) is int and 100 <= value <= 599:
                wrong.append(f"{module}:{node.lineno} {value}")
            name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if isinstance(name, str) and "status" in name.lower():
                wrong.append(f"{module}:{node.lineno} {name}")
    assert not wrong, "an HTTP status outside the HTTP layer:\n" + "\n".join(wrong)


def test_the_decode_route_calls_one_use_case() -> None:
    """``POST /v1/decode``'s handler reads the request, calls the decode use case and maps its
    outcome: under 30 lines, the use case called once, no decoder or recorder touched."""
    path = SOURCES[f"{PREFIX}.service.http.routes.decode"]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (handler,) = [
        n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "decode"
    ]
    assert handler.end_lineno is not None and handler.end_lineno - handler.lineno + 1 < 30
    calls = [ast.unparse(n.func) for n in ast.walk(handler) if isinstance(n, ast.Call)]
    assert calls.count("usecase.decode") == 1, calls
    assert not [c for c in calls if c.startswith(("service.decoder.", "service.recorder."))]


# --- no cycles ----------------------------------------------------------------------------


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _cycle_in(component: list[str]) -> list[str]:
    """One concrete cycle through the component's first module, for the message."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(GRAPH[node] & members):
            if child == start:
                return [*paths[node], start]
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    return component


def test_strongly_connected_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    """Module-level and function-level imports both count: a lazy import hides a cycle, it does
    not remove it."""
    cycles = [" -> ".join(_cycle_in(c)) for c in strongly_connected(GRAPH)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


# --- lazy imports only for heavy runtimes ---------------------------------------------------

# Third-party runtimes that are heavy to import (seconds, or hundreds of MB) or optional (an
# extra, a platform): a function imports them on first use, so `--help`, the pure core and the
# service's start-up never pay for a runtime the request does not need.
HEAVY = frozenset(
    {
        "onnxruntime",  # the ONNX Runtime path's session (hundreds of ms, native libraries)
        "onnxruntime_ep_webgpu",  # webgpu extra: the GPU path's plugin, registered on discovery
        "onnx",  # protobuf model surgery, only when a session is built
        "torch",  # tools extra
        "compressai",  # tools extra (installed with --no-deps by `make tools`)
        "coremltools",  # macOS only
        "wgpu",  # gpu extra; needs a driver
        "playwright",  # the page's browser check (tools/verify_page.py)
        "skimage",  # tools extra: quality metrics
        "scipy",  # tools extra
        "uvicorn",  # only `wai-dispatch serve` runs a server
        "alembic",  # migrations, only when a store is created or upgraded
        "jinja2",  # the WGSL kernels' templates, rendered on the path's first use
        "jsonschema",  # the policy's and the WGSL descriptors' schemas
        "simpleeval",  # the WGSL descriptors' expressions
        "safetensors",  # wai-ops/1 weights
        "PIL",  # PNG output only
        "constriction",  # the entropy coder's native extension
        "pytorch_msssim",  # tools extra
        "threadpoolctl",  # bench_timing's optional BLAS thread limit (the GEMM anchor)
        "httpx",  # an HTTP client (~0.3 s): the benches and the tools that drive a service
        "tomllib",  # the sink's client (cli/client_settings.py): a WAI_CONFIG only
        "ssl",  # OpenSSL: the sink's client (cli/http_client.py) loads it for https URLs only
        "ray",  # the ray extra: `serve --ray` and its deployment (service/rayserve/)
    }
)
# Modules that load a command's module when the command runs, and which modules: cli/main.py
# loads the sub-commands; `make-set` (and `bench make-set --quick`) loads the set writer it
# runs, whose module imports torch
# and the other tools-extra packages at its top (without the extra: `tools_missing`); `policy`
# loads the report store (SQLAlchemy) only for the commands that read it, so that `policy
# check` judges offline with governance alone.
LAZY_COMMANDS = {
    f"{PREFIX}.cli.main": (f"{PREFIX}.cli",),
    f"{PREFIX}.cli.policy": (f"{PREFIX}.service.store",),
    f"{PREFIX}.cli.tools": (
        f"{PREFIX}.tools.wai_int_synth_set",
        f"{PREFIX}.tools.wai_bmshj2018_npu_set",
        f"{PREFIX}.tools.wai_bmshj2018_hyperprior_set",
    ),
    # `bench make-set --quick` writes both sets from fresh models: the writers import torch
    f"{PREFIX}.tools.bench_make_set": (
        f"{PREFIX}.tools.wai_bmshj2018_npu_set",
        f"{PREFIX}.tools.wai_bmshj2018_hyperprior_set",
        f"{PREFIX}.tools._compressai",
    ),
}


def test_lazy_imports_only_for_heavy_runtimes() -> None:
    wrong = []
    for module, imports in IMPORTS.items():
        commands = LAZY_COMMANDS.get(module, ())
        for imp in imports:
            if imp.target.startswith(commands) and commands:
                continue
            if imp.lazy and imp.target.split(".")[0] not in HEAVY:
                wrong.append(f"{module}:{imp.line} imports {imp.target} inside a function")
    assert not wrong, (
        "function-level imports of what is not a heavy runtime (move them to the top):\n"
        + "\n".join(wrong)
    )


# --- the packages that re-export names ------------------------------------------------------

# The packages whose users import names from the package itself (``from wai_dispatch.dispatch
# import Offer``); every other ``__init__`` is its docstring, and its modules are imported by name.
REEXPORTS = ("dispatch", "codec.sets", "service.governance")


@pytest.mark.parametrize("name", REEXPORTS)
def test_package_reexports(name: str) -> None:
    """In the manner of httpx's ``test_all_imports_are_exported``: the package says what it is,
    every name in ``__all__`` exists, ``__all__`` is sorted, and every public name the
    ``__init__`` defines or imports (other than a submodule) is in ``__all__``."""
    package = importlib.import_module(f"{PREFIX}.{name}")
    assert package.__doc__ and len(package.__doc__.strip()) > 20, f"{name}: no docstring"
    exported = getattr(package, "__all__", None)
    assert isinstance(exported, list), f"{name}: no __all__ list"
    missing = [n for n in exported if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"
    # sorted as ruff's RUF022 sorts it: CONSTANTS, then Classes, then functions
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n)), f"{name}: unsorted"
    public = {
        attr
        for attr, value in vars(package).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and attr != "annotations"  # `from __future__`
    }
    assert public <= set(exported), f"{name}: public names not in __all__: {public - set(exported)}"


def _imported_from(package: str) -> set[str]:
    """The names the code, the tests and the docs import from ``package`` itself."""
    pattern = re.compile(rf"from {re.escape(package)} import (\([^)]*\)|[^\n]*)")
    found: set[str] = set()
    files = [*SOURCES.values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "docs").rglob("*.md")]
    for path in [*files, ROOT / "README.md"]:
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            for part in match.group(1).strip("()").split(","):
                found.add(part.split("#")[0].split(" as ")[0].strip())
    return found


@pytest.mark.parametrize("name", REEXPORTS)
def test_each_reexport_has_a_user(name: str) -> None:
    """No machinery without a user: a name a package re-exports is imported from it somewhere."""
    package = importlib.import_module(f"{PREFIX}.{name}")
    unused = set(package.__all__) - _imported_from(package.__name__)
    assert not unused, f"{name} re-exports names nobody imports from it: {sorted(unused)}"


def test_other_package_inits_are_docstrings() -> None:
    """Every other package's ``__init__`` is its docstring alone: importing a package (as every
    import of one of its modules does) loads none of its modules, so `wai-dispatch decode --url`
    pays for no decoder, and docs/architecture.md says each package's modules."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for module, path in SOURCES.items():
        name = module.removeprefix(PREFIX + ".")
        if path.name != "__init__.py" or name in (*REEXPORTS, "conformance"):
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        assert body and ast.get_docstring(ast.Module(body=body, type_ignores=[])), module
        assert len(body) == 1, f"{module}: an __init__ with code beyond its docstring"
    for name in REEXPORTS:
        assert f"`{name}`" in text, f"docs/architecture.md does not name {name}"


def test_cli_command_table_matches_the_modules() -> None:
    """cli/flags.py lists each command's module and help, so that `--help` and each command
    import only what they use: the table says exactly what the modules declare, in order."""
    from wai_dispatch.cli.flags import COMMANDS
    from wai_dispatch.cli.main import build_parser

    def commands(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return [(c.dest, c.help) for c in action._choices_actions]

    full = commands(build_parser())
    assert full == [(name, help) for name, (_, help) in COMMANDS.items()]
    assert commands(build_parser(["--help"])) == full
    assert build_parser(["--help"]).format_help() == build_parser().format_help()


def test_help_imports_no_command_module() -> None:
    """`wai-dispatch --help` loads no command's module, hence no decoder, store or runtime."""
    code = (
        "import sys; from wai_dispatch.cli.main import build_parser; build_parser(['--help']); "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('onnxruntime', 'onnx', 'torch', 'sqlalchemy', 'fastapi') "
        "or m.startswith('wai_dispatch.service.decoding.decoder'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""
