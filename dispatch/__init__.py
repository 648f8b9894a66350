"""wai-dispatch's pure core: the WAI Neural Dispatch rules (§2–§5) as values and functions.

No I/O and nothing heavier than the standard library: ``import dispatch`` never loads a
runtime. The adapters that answer §4's device questions live in ``paths/``.
"""

from __future__ import annotations

from .adapter import Adapter, BackendFailed, ScriptedAdapter
from .errors import InvalidOffer, InvalidReport, UnknownCapability, UnknownToken, WaiError
from .paths import (
    CPU_ONNX_RUNTIME,
    CPU_WAI_OPS,
    NPU_MODEL_RUNTIME,
    REFERENCE_OFFER,
    DispatchPath,
    Offer,
    parse_offer,
)
from .registry import BMSHJ2018, BMSHJ2018_HYPERPRIOR, INT_SYNTH, REGISTRY, Capability, Registry
from .report import KIND, Placement, Ran, Refusal, Report
from .rules import Answer, Decision, Pin, admit, ask_path, choose, demand, held_tier
from .tokens import Arithmetic, Backend, Code, Intent, RegistryClass, Tier, Unit

__all__ = [
    "BMSHJ2018",
    "BMSHJ2018_HYPERPRIOR",
    "CPU_ONNX_RUNTIME",
    "CPU_WAI_OPS",
    "INT_SYNTH",
    "KIND",
    "NPU_MODEL_RUNTIME",
    "REFERENCE_OFFER",
    "REGISTRY",
    "Adapter",
    "Answer",
    "Arithmetic",
    "Backend",
    "BackendFailed",
    "Capability",
    "Code",
    "Decision",
    "DispatchPath",
    "Intent",
    "InvalidOffer",
    "InvalidReport",
    "Offer",
    "Pin",
    "Placement",
    "Ran",
    "Refusal",
    "Registry",
    "RegistryClass",
    "Report",
    "ScriptedAdapter",
    "Tier",
    "Unit",
    "UnknownCapability",
    "UnknownToken",
    "WaiError",
    "admit",
    "ask_path",
    "choose",
    "demand",
    "held_tier",
    "parse_offer",
]
