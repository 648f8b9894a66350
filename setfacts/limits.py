"""The decode's limits: what a decode may allocate, checked against a header (the envelope's, the
payload's, a program's input) before anything is allocated. The codec checks its headers
against them; the paths' engines check the latents they are handed (docs/envelope.md, "Limits").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The defaults take a 4096 × 4096 picture through a 192-channel latent (256 × 256 latent
    positions, 12.6 M symbols) and refuse anything larger."""

    max_channels: int = 1024
    max_latent_height: int = 256
    max_latent_width: int = 256
    max_symbols: int = 192 * 256 * 256
    max_payload_bytes: int = 64 * 1024 * 1024
    max_envelope_bytes: int = 96 * 1024 * 1024
