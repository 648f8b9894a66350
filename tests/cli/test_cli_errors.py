"""The CLI's one-line promise: every user error is ``wai-dispatch: error: CODE: message`` on
the first line of stderr and exit status 2 — argparse's own errors, a bad configuration in the
environment, and a failing ONNX Runtime session (whose own log must not reach stderr raw)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from wai_dispatch.cli.main import main

ERROR_LINE = r"^wai-dispatch: error: [a-z0-9_]+: \S"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exc:  # argparse exits; the promise holds either way
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--bogus"],
        ["no-such-command"],
        ["decode"],
        ["decode", "x.json", "--nope"],
        ["decode", "x.json", "--offer"],
        ["plan", "--latent-shape"],
        ["make-set", "other"],
    ],
    ids=lambda a: " ".join(a) or "no-command",
)
def test_argparse_errors_are_invalid_argument(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """No command, an unknown flag, a missing argument: one typed line that says where the
    usage is, and no usage block after it."""
    status, out, err = run_cli(capsys, *argv)
    assert status == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("wai-dispatch: error: invalid_argument: "), err
    assert err.rstrip().endswith("--help)")
    assert out == ""


def test_help_still_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "--help")
    assert status == 0 and out.startswith("usage: wai-dispatch")


@pytest.mark.parametrize("value", ["abc", "0", "-3", "1.5", "٣"])
def test_bad_ort_threads_is_a_configuration_error_at_start(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """WAI_ORT_THREADS that is not a count: settings_invalid before anything runs, not a
    dispatch_backend_failed hidden in a report."""
    monkeypatch.setenv("WAI_ORT_THREADS", value)
    status, out, err = run_cli(capsys, "paths")
    assert status == 2 and out == ""
    want = f"wai-dispatch: error: settings_invalid: ort_threads (WAI_ORT_THREADS) = {value!r}:"
    assert err.startswith(want), err
    assert len(err.strip().splitlines()) == 1


def test_good_ort_threads_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    from wai_dispatch.service.settings import load

    monkeypatch.setenv("WAI_ORT_THREADS", " 2 ")
    assert load().ort_threads == 2
    monkeypatch.setenv("WAI_ORT_THREADS", "")
    assert load().ort_threads is None
    monkeypatch.delenv("WAI_ORT_THREADS")
    assert load().ort_threads is None


def test_a_failing_onnx_runtime_run_prints_nothing_raw() -> None:
    """ONNX Runtime logs a failing kernel in colour on stderr by itself; ours goes through
    Python logging (and the error is the adapter's BackendFailed)."""
    script = textwrap.dedent(
        """
        import numpy as np
        from onnx import TensorProto, helper
        from wai_dispatch.paths.onnx import shared_session_options
        import onnxruntime as ort

        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])
        w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [None, None])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])
        graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x, w], [y])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        session = ort.InferenceSession(
            model.SerializeToString(), shared_session_options(), providers=["CPUExecutionProvider"]
        )
        try:
            session.run(None, {"x": np.zeros((2, 3), "f4"), "w": np.zeros((2, 4), "f4")})
        except Exception as exc:
            print("raised", type(exc).__name__)
        """
    )
    env = {**os.environ, "WAI_ORT_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.stdout.strip() == "raised Fail", done.stderr
    assert "\x1b[" not in done.stderr and "onnxruntime" not in done.stderr, done.stderr
