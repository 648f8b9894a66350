"""Loading a ``wai-ops/1`` program: parse and validate it (:mod:`.program`), read its SafeTensors
weights, and prove the bound rule (:mod:`.bounds`) — the one way a program is opened."""

from __future__ import annotations

import numpy as np

from wai_dispatch.dispatch import strictjson
from wai_dispatch.paths.waiops.bounds import prove
from wai_dispatch.paths.waiops.errors import WaiOpsError, WeightsMismatch
from wai_dispatch.paths.waiops.program import Program, parse_program


def load_program(program_json: bytes, weights: bytes, *, rgb8_output: bool = False) -> Program:
    """Parse, validate and bound-check a program and its SafeTensors weights. Raises a
    :class:`WaiOpsError` subclass naming what is wrong. ``rgb8_output`` also requires the
    output's proven interval inside [0, 255]."""
    try:
        doc = strictjson.loads(program_json)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WaiOpsError(f"wai-ops program: not JSON ({exc})") from exc
    tensors = _read_weights(weights)
    program = parse_program(doc, tensors)
    return prove(program, rgb8_output=rgb8_output)


def _read_weights(data: bytes) -> dict[str, np.ndarray]:
    from safetensors.numpy import load

    try:
        return dict(load(data))
    except Exception as exc:  # safetensors raises its own SafetensorError
        raise WeightsMismatch(f"wai-ops weights: not a SafeTensors file ({exc})") from exc
