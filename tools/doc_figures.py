"""Figures the docs' prose takes from the bundled sets, held to them by the doc runner. A figure is
marked by an HTML comment right after it: ``up to 709<!-- fig int_synth.weight_max -->`` (inline
code's closing backtick may stand between); the text before the marker must end with the
figure as :data:`FIGURES` computes it now. Measurements are not figures: the docs date them."""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from blake3 import blake3

from wai_dispatch.codec.sets.bundled import bundled_digest, bundled_folders
from wai_dispatch.paths.waiops import choose, int8_digits, int8_engine, int8_graph
from wai_dispatch.paths.waiops.int8_digits import weight_digits
from wai_dispatch.paths.waiops.int8_engine import DIGIT_MAX, PLANE_BITS
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.program import Program

SETS = Path(__file__).resolve().parents[1] / "conformance" / "sets"
RETIRED = SETS.parent / "retired"  # sets a bundled one replaced (conformance/retired/README.md)
ORT_WEB = SETS.parents[1] / "service" / "web" / "page_files" / "vendor" / "onnxruntime_web"
INT_SYNTH = "int-synth-int8-units-demo-q3"
INT_RETIRED = "int-synth-demo-q3"  # the bundled integer set before INT_SYNTH
HYPERPRIOR = "bmshj2018-hyperprior-int8-units-demo-q3"
HYPER_RETIRED = "bmshj2018-hyperprior-demo-q3"  # the bundled hyperprior set before HYPERPRIOR
_MARK = re.compile(r"<!-- fig ([\w.-]+) -->")
_LOCK = threading.Lock()


def _where(folder: str) -> Path:
    """A bundled set's folder, or a retired one's."""
    return SETS / folder if (SETS / folder).is_dir() else RETIRED / folder


@cache
def _program(folder: str) -> Program:
    """The set's ``wai-ops/1`` program, loaded (and its bound rule proved) as a decoder does."""
    (program,) = _where(folder).glob("*.wai-ops.json")
    weights = program.with_name(program.name.removesuffix(".wai-ops.json") + ".safetensors")
    return load_program(program.read_bytes(), weights.read_bytes())


@dataclass(frozen=True)
class _Int8:
    bound: int  # the largest recombination bound the int8 graph engine proves
    idle: dict[str, list[float]]  # per convolution, each phase's share its second digit skips
    bounds: dict[str, int]  # per convolution, its largest recombination bound
    pair: int  # the largest pair of u8×s8 products a ConvInteger's GEMM sums (int16 on AVX2)
    raw: int  # the largest raw partial sum of a ConvInteger's GEMM


@cache
def _int8(folder: str) -> _Int8:
    """What the int8 graph engine works out building the program's graph: every
    ``ConvInteger``'s weights, planes and recombination bound (docs/wai-ops.md)."""
    seen: list[tuple[str, np.ndarray, list[tuple[int, int]]]] = []
    bounds: dict[str, int] = {}
    conv, bound = int8_graph._conv_integer, int8_digits.recombination_bound

    def conv_spy(g: Any, planes: Any, w: np.ndarray, *rest: Any, **parts: Any) -> str:
        seen.append((rest[-1].split(".phase")[0], w, rest[-2]))
        return conv(g, planes, w, *rest, **parts)

    def bound_spy(*args: Any) -> int:
        got = bound(*args)
        bounds[seen[-1][0]] = max(bounds.get(seen[-1][0], 0), got)
        return got

    with (
        _LOCK,
        mock.patch.object(int8_graph, "_conv_integer", conv_spy),
        mock.patch.object(int8_graph, "recombination_bound", bound_spy),
    ):
        int8_graph.build_model(_program(folder))
    idle: dict[str, list[float]] = {}
    sums = [(0, 0)]
    for name, w, ranges in seen:
        _, digits = weight_digits(w)
        sums.append(int8_digits.gemm_sums(ranges, int(w[0].size)))
        if len(digits) > 1:
            read = np.flatnonzero(np.abs(digits[1]).sum(axis=(0, 2, 3))).size
            idle.setdefault(name, []).append(1 - read / w.shape[1])
    pair, raw = (max(v) for v in zip(*sums, strict=True))
    return _Int8(max(bounds.values()), idle, bounds, pair, raw)


@cache
def _int8_engine_terms(folder: str) -> int:
    """The most terms ``K`` of one ``MatMulInteger`` GEMM the int8 engine builds for the
    program (each raw partial sum is at most ``127 · 127 · K``)."""
    ks = [0]
    gemm = int8_engine.Int8Engine._gemm

    def gemm_spy(self: Any, name: str, w: np.ndarray, *rest: Any) -> Any:
        ks.append(int(w.shape[0]))
        return gemm(self, name, w, *rest)

    with _LOCK, mock.patch.object(int8_engine.Int8Engine, "_gemm", gemm_spy):
        int8_engine.Int8Engine(_program(folder))
    return max(ks)


def _int8_engine_sums(folder: str) -> tuple[int, int]:
    """The int8 engine's pair of u8×s8 products and raw GEMM partial sum, at most."""
    top = (1 << PLANE_BITS) - 1
    return 2 * top * DIGIT_MAX, top * DIGIT_MAX * _int8_engine_terms(folder)


def _weights(folder: str, name: str) -> str:
    (op,) = (op for op in _program(folder).operations if op.name == name)
    return _range(int(op.params["weight"].min()), int(op.params["weight"].max()))


def _weight_max(folder: str) -> int:
    ops = _program(folder).operations
    return max(int(np.abs(op.params["weight"]).max()) for op in ops if "weight" in op.params)


def _input(folder: str, name: str) -> str:
    """A convolution's input's proven range (the hull over its channels)."""
    program = _program(folder)
    (op,) = (op for op in program.operations if op.name == name)
    lo, hi = program.bounds[op.inputs[0]]
    return _range(int(lo.min()), int(hi.max()))


def _per_mac(folder: str) -> str:
    """``1.065``: the int8 graph engine's int8 products a multiply-accumulate over the
    synthesis (:func:`~paths.waiops.int8_graph.products_per_mac`, the chooser's count)."""
    program = _program(folder)
    with _LOCK:
        _, products = int8_graph.build_model(program)
    return f"{int8_graph.products_per_mac(program, products):.3f}"


def _sci(n: float, digits: int) -> str:
    """``1.053 · 10^9``: ``digits`` decimals of the mantissa, as the docs write powers."""
    exp = math.floor(math.log10(n))
    return f"{n / 10**exp:.{digits}f} · 10^{exp}"


def _second_digit(folder: str, *, read: bool) -> str:
    """``68–79%``: the smallest and largest share of a phase's input channels whose second
    weight digit is 0 (``read``: is not) in ``deconv2`` and ``deconv3``."""
    idle = _int8(folder).idle
    shares = [abs(read - v) for name in ("deconv2", "deconv3") for v in idle[name]]
    return f"{round(100 * min(shares))}–{round(100 * max(shares))}%"


def _payload(folder: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((_where(folder) / "payload.json").read_text("utf-8"))
    return loaded


def _digest(folder: str) -> str:
    return str(bundled_digest(_where(folder)))


def _symbols(folder: str) -> str:
    return str(_payload(folder)["symbols_digest"])


def _payload_bytes(folder: str) -> str:
    return f"{(_where(folder) / 'payload.bin').stat().st_size:,}"


def _checkpoint(stem: str) -> str:
    return blake3((SETS.parent / "weights" / f"{stem}.pt").read_bytes()).hexdigest()


def _per_set() -> dict[str, Callable[[], str]]:
    """Per bundled (or retired) set folder: its digest, its payload's symbols digest, size and
    bits per pixel; per demo checkpoint (``conformance/weights/``), its BLAKE3."""
    out: dict[str, Callable[[], str]] = {}
    for path in bundled_folders(SETS) + bundled_folders(RETIRED):
        for what, read in (("digest", _digest), ("symbols", _symbols)):
            out[f"{path.name}.{what}"] = partial(read, path.name)
        out[f"{path.name}.payload_bytes"] = partial(_payload_bytes, path.name)
        out[f"{path.name}.bpp"] = partial(_bpp, path.name)
    for pt in sorted((SETS.parent / "weights").glob("*.pt")):
        out[f"weights.{pt.stem}"] = partial(_checkpoint, pt.stem)
    return out


def _bpp(folder: str) -> str:
    _, _, h, w = _payload(folder)["picture_shape"]
    return f"{(_where(folder) / 'payload.bin').stat().st_size * 8 / (h * w):.2f}"


def _onnx_operations(folder: str) -> str:
    import onnx

    model = onnx.load(str(SETS / folder / "decoder.onnx"), load_external_data=False)
    return str(len(model.graph.node))


def _gamma_max(folder: str) -> str:
    """``30, 23 and 3``: each inverse GDN's largest integer γ, in the program's order."""
    igdns = [op for op in _program(folder).operations if op.op == "igdn"]
    tops = [str(int(op.params["gamma"].max())) for op in igdns]
    return ", ".join(tops[:-1]) + " and " + tops[-1]


def _megabytes(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def _range(lo: int, hi: int) -> str:
    return f"[{lo}, {hi}]"


def _output(folder: str, name: str) -> str:
    """An operation's output's proven range (the hull over its channels)."""
    program = _program(folder)
    (op,) = (op for op in program.operations if op.name == name)
    lo, hi = program.bounds[op.output]
    return _range(int(lo.min()), int(hi.max()))


def _bounds(key: str, folder: str, convs: tuple[str, ...]) -> dict[str, Callable[[], str]]:
    """What each engine's proof bounds in the program (docs/wai-ops.md, the exactness table):
    its largest value (share of 2^24 and of 2^31), each convolution's accumulator bound, output
    range after its requantisation and int8-graph recombination bound, and the pair and raw
    GEMM sums of both int8 engines."""

    def largest() -> int:
        return _program(folder).largest

    out: dict[str, Callable[[], str]] = {
        f"{key}.largest": lambda: f"{largest():,}",
        f"{key}.largest_of_2_24": lambda: f"{100 * largest() / 2**24:.1f}%",
        f"{key}.largest_of_2_31": lambda: f"{100 * largest() / 2**31:.1f}%",
        f"{key}.int8_graph_pair": lambda: f"{_int8(folder).pair:,}",
        f"{key}.int8_graph_raw": lambda: f"{_int8(folder).raw:,}",
        f"{key}.int8_engine_pair": lambda: f"{_int8_engine_sums(folder)[0]:,}",
        f"{key}.int8_engine_raw": lambda: f"{_int8_engine_sums(folder)[1]:,}",
    }
    for name in convs:
        out[f"{key}.accumulator.{name}"] = partial(
            lambda n: f"{_program(folder).accumulators[n]:,}", name
        )
        out[f"{key}.int8_bounds.{name}"] = partial(lambda n: f"{_int8(folder).bounds[n]:,}", name)
        out[f"{key}.outputs.{name}.requant"] = partial(_output, folder, f"{name}.requant")
    return out


#: Each figure's name and how it reads now.
FIGURES: dict[str, Callable[[], str]] = {
    "int_synth.input_range": lambda: _range(*_program(INT_SYNTH).input_range),
    "int_synth.operations": lambda: str(_program(INT_SYNTH).operation_count),
    "int_synth.igdn_gamma_max": lambda: _gamma_max(INT_SYNTH),
    "int_synth.weights_size": lambda: _megabytes(SETS / INT_SYNTH / "synthesis.safetensors"),
    "bmshj2018-demo-q3.onnx_operations": lambda: _onnx_operations("bmshj2018-demo-q3"),
    "page.ort_wasm": lambda: _megabytes(ORT_WEB / "ort-wasm-simd-threaded.wasm"),
    "page.ort_webgpu": lambda: _megabytes(ORT_WEB / "ort-wasm-simd-threaded.asyncify.wasm"),
    **{
        f"int_synth.weights.{name}": partial(_weights, INT_SYNTH, name)
        for name in ("deconv1", "deconv2", "deconv3")
    },
    "int_synth.weight_max": lambda: f"{_weight_max(INT_SYNTH):,}",
    "int_synth.int8_bound": lambda: _sci(_int8(INT_SYNTH).bound, 1),
    "int_synth.int8_bound_share": lambda: f"{100 * _int8(INT_SYNTH).bound / 2**31:.1f}%",
    "int_synth.weights.deconv4": partial(_weights, INT_SYNTH, "deconv4"),
    **{
        f"int_synth.inputs.{name}": partial(_input, INT_SYNTH, name)
        for name in ("deconv1", "deconv2", "deconv3", "deconv4")
    },
    "int_synth.products_per_mac": partial(_per_mac, INT_SYNTH),
    "choose.int8_graph_per_mac": lambda: str(choose.INT8_GRAPH_PER_MAC),
    "int_synth_retired.products_per_mac": partial(_per_mac, INT_RETIRED),
    "int_synth_retired.igdn_gamma_max": lambda: _gamma_max(INT_RETIRED),
    "int_synth_retired.weight_max": lambda: f"{_weight_max(INT_RETIRED):,}",
    **{
        f"int_synth_retired.weights.{name}": partial(_weights, INT_RETIRED, name)
        for name in ("deconv1", "deconv2", "deconv3")
    },
    "int_synth_retired.second_digit_idle": partial(_second_digit, INT_RETIRED, read=False),
    "int_synth_retired.second_digit_read": partial(_second_digit, INT_RETIRED, read=True),
    **_bounds("int_synth", INT_SYNTH, ("deconv1", "deconv2", "deconv3", "deconv4")),
    **_bounds("h_s", HYPERPRIOR, ("deconv1", "deconv2", "conv3")),
    "int_synth.igdn_product_max": lambda: f"{max(_program(INT_SYNTH).roots_products.values()):,}",
    "int_synth.igdn_product_share": lambda: (
        f"{100 * max(_program(INT_SYNTH).roots_products.values()) / 2**23:.1f}%"
    ),
    "h_s.products_per_mac": partial(_per_mac, HYPERPRIOR),
    "h_s.weight_max": lambda: f"{_weight_max(HYPERPRIOR):,}",
    **{
        f"h_s.{what}.{name}": partial(read, HYPERPRIOR, name)
        for what, read in (("inputs", _input), ("weights", _weights))
        for name in ("deconv1", "deconv2", "conv3")
    },
    "h_s.accumulator_max": lambda: f"{max(_program(HYPERPRIOR).accumulators.values()):,}",
    "h_s.int8_bound": lambda: _sci(_int8(HYPERPRIOR).bound, 2),
    "h_s.int8_bound_share": lambda: f"{100 * _int8(HYPERPRIOR).bound / 2**31:.1f}%",
    **_bounds("h_s_retired", HYPER_RETIRED, ("deconv1", "deconv2", "conv3")),
    "h_s_retired.products_per_mac": partial(_per_mac, HYPER_RETIRED),
    "h_s_retired.weight_max": lambda: f"{_weight_max(HYPER_RETIRED):,}",
    "h_s_retired.accumulator_max": lambda: _sci(
        max(_program(HYPER_RETIRED).accumulators.values()), 3
    ),
    "h_s_retired.int8_bound": lambda: _sci(_int8(HYPER_RETIRED).bound, 2),
    "h_s_retired.int8_bound_share": lambda: f"{100 * _int8(HYPER_RETIRED).bound / 2**31:.1f}%",
    **_per_set(),
}
#: A digest's short forms: ``NAME.short`` is ``09c6186a…5c44``, ``NAME.prefix`` ``847953aa…``.
FORMS: dict[str, Callable[[str], str]] = {
    "short": lambda digest: f"{digest[:8]}…{digest[-4:]}",
    "prefix": lambda digest: f"{digest[:8]}…",
}


@cache
def figure(name: str) -> str:
    """The figure ``name`` as it reads now (once a process: the sets do not change under it);
    a ``KeyError`` for a name neither :data:`FIGURES` nor :data:`FORMS` makes."""
    base, _, form = name.rpartition(".")
    if name not in FIGURES and form in FORMS:
        return FORMS[form](FIGURES[base]())
    return FIGURES[name]()


def check_figures(path: Path) -> tuple[int, list[tuple[int, str]]]:
    """The figures ``path`` marks, and ``(line, problem)`` for each that does not read as
    :data:`FIGURES` computes it."""
    text = path.read_text(encoding="utf-8")
    problems: list[tuple[int, str]] = []
    marks = list(_MARK.finditer(text))
    for mark in marks:
        line = text.count("\n", 0, mark.start()) + 1
        name = mark.group(1)
        try:
            want = figure(name)
        except KeyError:
            problems.append((line, f"marks the figure {name!r}, which tools/doc_figures.py lacks"))
            continue
        before = text[: mark.start()].removesuffix("`")
        if not before.endswith(want) or before[: -len(want)][-1:].isalnum():
            shown = before[-len(want) - 8 :].rsplit("\n", 1)[-1]
            problems.append((line, f"the figure {name} is {want!r} now; the doc has …{shown!r}"))
    return len(marks), problems
