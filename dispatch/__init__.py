"""wai-dispatch's pure core: the WAI Neural Dispatch rules (§2–§5) as values and functions.

No I/O and nothing heavier than the standard library: ``import dispatch`` never loads a
runtime. The adapters that answer §4's device questions live in ``paths/``.
"""

from __future__ import annotations

from .adapter import Adapter, BackendFailed, ScriptedAdapter
from .errors import InvalidOffer, InvalidReport, UnknownCapability, WaiError
from .offer import (
    CPU_ONNX_RUNTIME,
    CPU_WAI_OPS,
    NPU_MODEL_RUNTIME,
    REFERENCE_OFFER,
    DispatchPath,
    Offer,
    parse_offer,
)
from .registry import BMSHJ2018, INT_SYNTH, REGISTRY, Capability, Registry
from .report import KIND, Placement, Ran, Refusal, Report
from .rules import Pin, admit, ask_path, choose, demand, held_tier
from .tokens import Arithmetic, Backend, Code, Intent, RegistryClass, Tier, Unit

__all__ = [
    "BMSHJ2018",
    "CPU_ONNX_RUNTIME",
    "CPU_WAI_OPS",
    "INT_SYNTH",
    "KIND",
    "NPU_MODEL_RUNTIME",
    "REFERENCE_OFFER",
    "REGISTRY",
    "Adapter",
    "Arithmetic",
    "Backend",
    "BackendFailed",
    "Capability",
    "Code",
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
    "WaiError",
    "admit",
    "ask_path",
    "choose",
    "demand",
    "held_tier",
    "parse_offer",
]
