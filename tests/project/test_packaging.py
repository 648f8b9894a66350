"""The wheel installs one import root, ``wai_dispatch``, with its data, and without the demo
weights; installed from the wheel (not the checkout), the command decodes the bundled sample."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of the tracked files: a build/ folder left in a checkout could carry
    # modules that no longer exist into the wheel.
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    for name in filter(None, (t.decode() for t in tracked)):
        if (ROOT / name).is_symlink():  # wai_dispatch/<folder> -> ../<folder>
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(ROOT / name), source / name)
        elif (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip, "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # a data folder missing from `packages` makes setuptools warn on every install
    assert "absent from the `packages` configuration" not in built.stderr, built.stderr
    (found,) = out.glob("wai_dispatch-*.whl")
    return found


@pytest.mark.slow
def test_the_wheel_has_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {name.split("/")[0] for name in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"wai_dispatch"}
    assert len(dist_info) == 1
    # the data a decode needs is in it; the training weights are not
    assert any(n.startswith("wai_dispatch/conformance/sets/bmshj2018-demo-q3/") for n in names)
    assert "wai_dispatch/conformance/envelopes/bmshj2018-demo-q3.json" in names
    assert any(n.startswith("wai_dispatch/conformance/dispatch/") for n in names)
    assert not any("/weights/" in n for n in names)
    # the bundled integer set is; the set it replaced (conformance/retired/) is not
    assert "wai_dispatch/conformance/sets/int-synth-int8-units-demo-q3/set.json" in names
    assert not any("/retired/" in n for n in names)
    assert "wai_dispatch/py.typed" in names
    # the browser page and its vendored library with its licence (docs/page.md)
    assert "wai_dispatch/service/web/page_files/index.html" in names
    assert "wai_dispatch/service/web/page_files/js/dispatch/rules.js" in names
    assert "wai_dispatch/service/web/page_files/vendor/noble_hashes/blake3.js" in names
    assert "wai_dispatch/service/web/page_files/vendor/noble_hashes/LICENSE" in names
    vendored = "wai_dispatch/service/web/page_files/vendor/onnxruntime_web/"
    for name in [
        "ort.wasm.min.mjs",
        "ort-wasm-simd-threaded.mjs",
        "ort-wasm-simd-threaded.wasm",
        "ort.webgpu.min.mjs",  # the WebGPU build (gpu/onnx-runtime/float on the page)
        "ort-wasm-simd-threaded.asyncify.mjs",
        "ort-wasm-simd-threaded.asyncify.wasm",
    ]:
        assert vendored + name in names
    assert vendored + "LICENSE" in names
    assert "wai_dispatch/service/web/page_files/js/onnx.js" in names


@pytest.mark.slow
def test_the_installed_wheel_decodes_the_sample(wheel: Path, tmp_path: Path) -> None:
    """A fresh environment with the wheel installed (its dependencies borrowed from this one):
    the console script and ``python -m wai_dispatch`` both run, from an unrelated folder whose
    own ``service/`` and ``tools/`` folders must not shadow anything."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # borrow this environment's dependencies without its editable install of the checkout
    # (every site-packages folder on the path: a worktree's venv may chain to another's)
    here = sysconfig.get_paths()["purelib"]
    deps = [here, *(p for p in sys.path if p.endswith("site-packages") and p != here)]
    Path(purelib, "zz_deps.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    target = Path(purelib)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    work = tmp_path / "elsewhere"
    for shadow in ("service", "tools", "dispatch", "paths"):
        (work / shadow).mkdir(parents=True)
        (work / shadow / "__init__.py").write_text("raise ImportError('shadowed')\n")
    # PYTHONPATH would put a checkout before the installed wheel: the test is of the wheel.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["WAI_DATA_DIR"] = str(tmp_path / "data")
    result = subprocess.run(
        [python, "-m", "wai_dispatch", "demo", "-o", str(tmp_path / "out")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "ran      cpu/onnx-runtime/float" in result.stdout
    assert (tmp_path / "out" / "bmshj2018-demo-q3.png").stat().st_size > 10_000
    located = subprocess.run(
        [python, "-c", "import wai_dispatch.codec as c; print(c.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert located.startswith(str(target))
