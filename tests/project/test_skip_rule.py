"""No test turns a regression into a skip: every skip in tests/ stands behind a condition on the
environment (what is installed, the platform, a variable, a tool on PATH), never on what the
code under test does.

The rule, read from each file's syntax tree:

- ``pytest.skip(...)`` / ``pytest.xfail(...)``: inside an ``if`` whose test mentions one of
  :data:`PROBES`, or inside an ``except`` of :data:`ENV_ERRORS`. An ``except ImportError``
  guards a skip only where its ``try`` imports nothing but third-party modules, or where the
  skip sits under an ``if`` on the error's ``.name`` (the missing package, as
  ``tests/_thirdparty.import_or_skip`` reads it): a project helper that raises, even an
  ``ImportError`` of our own, is a failure. No ``except Exception`` guards a skip;
- ``pytest.importorskip(NAME)``: ``NAME`` an optional package, not ``wai_dispatch`` and not one
  of the core dependencies of pyproject.toml (those are installed wherever the package is: a
  failed import is a regression);
- ``@pytest.mark.skipif(COND)`` / ``xfail(COND)`` (also in ``pytestmark``): ``COND`` mentions one
  of :data:`PROBES`; ``@pytest.mark.skip`` / ``xfail`` without a condition: never.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: What an environment condition mentions (a regular expression over the condition's source).
PROBES = re.compile(
    r"os\.environ|os\.getenv|shutil\.which|sys\.platform|platform\.|os\.geteuid|\.exists\(\)"
    r"|find_spec|returncode|get_available_providers|\bpg_\w+\(|\bmissing\b|\bHAS_[A-Z_]+\b"
)
#: The exceptions of an availability probe.
ENV_ERRORS = {"ImportError", "ModuleNotFoundError", "OSError", "UnitAbsent"}


def core_dependencies() -> set[str]:
    """The import names of pyproject's unconditional dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = set()
    for spec in project["dependencies"]:
        if ";" in spec:  # a platform's dependency (coremltools on macOS) is optional elsewhere
            continue
        name = re.split(r"[<>=!~\[ ]", spec, maxsplit=1)[0].lower().replace("-", "_")
        names.add({"pillow": "PIL", "pyyaml": "yaml", "psycopg": "psycopg"}.get(name, name))
    return names


def _is_pytest_attr(node: ast.AST, *names: str) -> bool:
    """``pytest.NAME`` or ``pytest.mark.NAME``."""
    if not isinstance(node, ast.Attribute) or node.attr not in names:
        return False
    value = node.value
    if isinstance(value, ast.Attribute) and value.attr == "mark":
        value = value.value
    return isinstance(value, ast.Name) and value.id == "pytest"


IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _third_party_imports_only(body: list[ast.stmt]) -> bool:
    """A ``try`` body of imports only, none of them ours (``wai_dispatch`` or relative)."""
    for stmt in body:
        if isinstance(stmt, ast.Import):
            if any(a.name.split(".")[0] == "wai_dispatch" for a in stmt.names):
                return False
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level or (stmt.module or "").split(".")[0] == "wai_dispatch":
                return False
        else:
            return False
    return True


def _guarded(parents: list[ast.AST], source: str) -> bool:
    for at, node in reversed(list(enumerate(parents))):
        if isinstance(node, ast.If | ast.IfExp) and PROBES.search(
            ast.get_source_segment(source, node.test) or ""
        ):
            return True
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
            if caught & (ENV_ERRORS - IMPORT_ERRORS):
                return True
            if caught & IMPORT_ERRORS:
                tried = parents[at - 1] if at else None
                if isinstance(tried, ast.Try) and _third_party_imports_only(tried.body):
                    return True
                # under the handler: an `if` on the missing module's name (exc.name)
                on_name = r"\bmissing_package\("
                if node.name:
                    on_name += rf"|\b{re.escape(node.name)}\.name\b"
                return any(
                    isinstance(inner, ast.If)
                    and re.search(on_name, ast.get_source_segment(source, inner.test) or "")
                    for inner in parents[at + 1 :]
                )
    return False


def violations(path: Path, core: set[str], root: Path = ROOT) -> list[str]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    found: list[str] = []

    def where(node: ast.AST) -> str:
        return f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"

    def visit(node: ast.AST, parents: list[ast.AST]) -> None:
        if isinstance(node, ast.Call):
            if _is_pytest_attr(node.func, "skip", "xfail") and not isinstance(
                getattr(node.func, "value", None), ast.Attribute
            ):
                if not _guarded(parents, source):
                    what = f"pytest.{node.func.attr}"  # type: ignore[attr-defined]
                    found.append(f"{where(node)}: {what} not behind an environment condition")
            elif _is_pytest_attr(node.func, "importorskip"):
                arg = node.args[0] if node.args else None
                name = arg.value if isinstance(arg, ast.Constant) else None
                root = str(name).split(".")[0]
                if root == "wai_dispatch" or root in core:
                    found.append(
                        f"{where(node)}: importorskip({name!r}) of a module that is always "
                        "installed: import it (a failed import is a regression)"
                    )
            elif _is_pytest_attr(node.func, "skipif", "xfail") and isinstance(
                node.func.value,  # type: ignore[attr-defined]
                ast.Attribute,
            ):
                cond = node.args[0] if node.args else None
                text = ast.get_source_segment(source, cond) if cond is not None else ""
                if not PROBES.search(text or ""):
                    what = f"{node.func.attr}({text})"  # type: ignore[attr-defined]
                    found.append(f"{where(node)}: {what} is no environment condition")
        elif isinstance(node, ast.Attribute) and _is_pytest_attr(node, "skip", "xfail"):
            marks = isinstance(node.value, ast.Attribute)
            parent = parents[-1] if parents else None
            called = isinstance(parent, ast.Call) and parent.func is node and bool(parent.args)
            if marks and (node.attr == "skip" or not called):
                found.append(f"{where(node)}: an unconditional pytest.mark.{node.attr}")
        for child in ast.iter_child_nodes(node):
            visit(child, [*parents, node])

    visit(tree, [])
    return found


def test_every_skip_stands_behind_an_environment_condition() -> None:
    core = core_dependencies()
    assert {"numpy", "onnxruntime", "simpleeval", "jinja2"} <= core
    files = sorted((ROOT / "tests").rglob("*.py"))
    assert len(files) > 50
    found = [v for f in files for v in violations(f, core)]
    assert not found, "\n".join(found)


def test_the_rule_catches_a_skip_on_the_code_under_test(tmp_path: Path) -> None:
    """The shape issue 21 found: a skip when the code under test answers otherwise."""
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        "import os, pytest\n"
        "def test_a():\n"
        "    try:\n        check()\n    except ValueError:\n        pass\n"
        "    else:\n        pytest.skip('not refused yet')\n"
        "def test_b():\n    if os.environ.get('X'):\n        pytest.skip('env')\n"
        "pytest.importorskip('wai_dispatch.paths.waiops')\n"
        "pytest.importorskip('torch')\n"
        "@pytest.mark.skipif(answer() == 1, reason='x')\ndef test_c(): pass\n"
        "@pytest.mark.skip(reason='later')\ndef test_d(): pass\n",
        encoding="utf-8",
    )
    found = violations(bad, {"numpy"}, tmp_path)
    assert [line.split(":")[1] for line in found] == ["8", "12", "14", "16"], found


def test_the_rule_catches_a_skip_on_a_project_helper(tmp_path: Path) -> None:
    """Issue 26's loophole: a project helper that raises (anything, an ``ImportError`` of our
    own included) is no reason to skip; only a third-party package's ``ImportError`` is."""
    bad = tmp_path / "test_helper.py"
    bad.write_text(
        "import pytest\n"
        "try:\n    import torch\n    from wai_dispatch.tools._compressai import factorized_prior\n"
        "    factorized_prior()\nexcept Exception as exc:\n    pytest.skip(str(exc))\n"
        "try:\n    factorized_prior()\nexcept ImportError:\n    pytest.skip('no')\n"
        "try:\n    from wai_dispatch.paths import wgsl\n"
        "except ImportError:\n    pytest.skip('no')\n"
        "try:\n    import playwright\nexcept ImportError:\n    pytest.skip('ok')\n"
        "try:\n    factorized_prior()\nexcept ImportError as exc:\n"
        "    if exc.name in ('torch',):\n        pytest.skip('ok')\n    raise\n",
        encoding="utf-8",
    )
    found = violations(bad, {"numpy"}, tmp_path)
    assert [line.split(":")[1] for line in found] == ["7", "11", "15"], found


# Two tools test modules that load CompressAI through tests/_thirdparty.import_or_skip.
TOOLS_MODULES = ("tests/tools/test_checkpoints.py", "tests/tools/test_set_writer.py")


@pytest.mark.slow  # a pytest run that imports torch: ~10 s
@pytest.mark.slow  # a pytest run in a subprocess collecting the tools tests: about 6 s
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="the tools extra (torch) is not installed"
)
def test_a_missing_torchvision_fails_the_tools_tests(tmp_path: Path) -> None:
    """Hide ``torchvision`` (the shim `make tools` installs, shims/torchvision/) with a plugin
    loaded before the test modules: CompressAI's import fails, and since the skip names only
    torch and CompressAI, collecting the tools test modules fails; nothing is skipped."""
    (tmp_path / "hide_torchvision.py").write_text(
        "import sys\nsys.modules['torchvision'] = None\n", encoding="utf-8"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "hide_torchvision",
            "-p",
            "no:cacheprovider",
            *TOOLS_MODULES,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert out.count("ModuleNotFoundError: No module named 'torchvision") >= len(TOOLS_MODULES), out
    assert "skipped" not in out, out
