"""What a decode will cost, read from its payload headers before anything is allocated: the
largest part's latent elements and output pixels, its memory and its time. The service's
admission (service/http/admission.py) and the CLI's local decode (cli/decode.py) apply the
same estimate against the same settings (``max_latent_elements``, ``memory_budget_bytes``,
``decode_timeout_s``).

The estimate (measured on this machine with the bmshj2018 synthesis, tools/bench_service.py
and tools/bench_tiles.py): an untiled decode's memory grows linearly with the picture, about
520 bytes per output pixel (256×256: 32 MB, 1024×1024: 548 MB over a warm process), nearly all
of it the synthesis's activations. The CPU paths run the synthesis in tiles whose activations
stay within the ``tile_bytes`` setting (paths/tiling.py), so the estimate is 64 MiB, plus what
the whole picture costs (:data:`PICTURE_BYTES_PER_PIXEL`: the float picture, its RGB8, the
PNG and its answer), plus the activations (the rest of 560 bytes per pixel) up to one tile's
budget: 560 bytes per pixel until the tiles start (about 700×700), 40 after. Time is
about 1.7 µs per pixel on 2 quiet cores.
"""

from __future__ import annotations

from dataclasses import dataclass

from wai_dispatch.paths.tiling import DEFAULT_TILE_BYTES
from wai_dispatch.service.decoding.errors import LatentOverLimit, MemoryOverBudget, TimeOverLimit
from wai_dispatch.service.decoding.opened import Prepared

__all__ = [
    "BASE_BYTES",
    "BYTES_PER_PIXEL",
    "DEFAULT_UPSAMPLING",
    "PICTURE_BYTES_PER_PIXEL",
    "SECONDS_PER_PIXEL",
    "Estimate",
    "check",
    "estimate",
    "of",
]

BASE_BYTES = 64 * 1024 * 1024
BYTES_PER_PIXEL = 560
#: What the picture itself costs per pixel whatever the tiles: the float32 synthesis output
#: (12 B), its RGB8 (3), the PNG and the answer around it (base64 in JSON), with a margin.
PICTURE_BYTES_PER_PIXEL = 40
SECONDS_PER_PIXEL = 1.7e-6
DEFAULT_UPSAMPLING = 16


@dataclass(frozen=True)
class Estimate:
    """The largest part's latent elements and output pixels, and the decode's cost."""

    latent_elements: int
    pixels: int
    memory_bytes: int
    seconds: float


def estimate(prepared: Prepared, tile_bytes: int | None = None) -> Estimate:
    """The cost of decoding an envelope from its payload headers alone, as
    :meth:`Decoder.prepare` read them (parts decode one at a time, so the dearest part is the
    decode's); a part's set, where it is installed, may state its ``upsampling``.
    ``tile_bytes``: the synthesis's tile budget (default: the preparing decoder's,
    :attr:`Prepared.tile_bytes`, its ``tile_bytes`` setting)."""
    elements = pixels = 0
    for item in prepared.parts:
        header = item.header
        if header is None:
            continue  # not decodable here at all: the decoder says so, or tries the fallback
        factor = DEFAULT_UPSAMPLING
        if item.opened is not None:
            up = (item.opened.files.facts.model_extra or {}).get("upsampling")
            if isinstance(up, int) and 1 <= up <= 64:
                factor = up
        elements = max(elements, header.symbols)
        pixels = max(pixels, header.height * factor * header.width * factor)
    return of(elements, pixels, prepared.tile_bytes if tile_bytes is None else tile_bytes)


def of(latent_elements: int, pixels: int, tile_bytes: int = DEFAULT_TILE_BYTES) -> Estimate:
    """The estimate of a decode of ``latent_elements`` to ``pixels`` output pixels, its
    synthesis in tiles of ``tile_bytes`` (default: :data:`paths.tiling.DEFAULT_TILE_BYTES`)."""
    activations = min((BYTES_PER_PIXEL - PICTURE_BYTES_PER_PIXEL) * pixels, tile_bytes)
    return Estimate(
        latent_elements,
        pixels,
        BASE_BYTES + activations + PICTURE_BYTES_PER_PIXEL * pixels,
        SECONDS_PER_PIXEL * pixels,
    )


def check(
    est: Estimate,
    *,
    max_latent_elements: int,
    memory_budget_bytes: int,
    decode_timeout_s: float,
    lifted_by: str = "",
) -> None:
    """Refuse a decode over a limit, naming the limit (and ``lifted_by``, what lifts it, where
    something does): ``latent_over_limit``, ``decode_memory_over_budget`` or
    ``decode_time_over_limit``."""
    lift = f"; {lifted_by} lifts it" if lifted_by else ""
    if est.latent_elements > max_latent_elements:
        raise LatentOverLimit(
            f"the latent has {est.latent_elements} elements, over the limit "
            f"max_latent_elements={max_latent_elements}{lift}",
        )
    if est.memory_bytes > memory_budget_bytes:
        raise MemoryOverBudget(
            f"a {est.pixels}-pixel decode needs about {est.memory_bytes >> 20} MiB, over the "
            f"limit memory_budget_bytes={memory_budget_bytes} "
            f"({memory_budget_bytes >> 20} MiB){lift}",
        )
    if est.seconds > decode_timeout_s:
        raise TimeOverLimit(
            f"a {est.pixels}-pixel decode takes about {est.seconds:.1f} s, over the limit "
            f"decode_timeout_s={decode_timeout_s:g}{lift}",
        )
