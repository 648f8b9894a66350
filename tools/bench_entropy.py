"""Benchmark of the entropy stage (§6.3): a 1 × 192 × 16 × 16 latent decoded by ours
(constriction) beside CompressAI's C++ rANS on the same tables and symbols, best of N."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from wai_dispatch.codec.payload import decode, encode, latent, symbols_digest
from wai_dispatch.codec.tables import EntropyTables, laplacian_tables
from wai_dispatch.tools.harness import best_of
from wai_dispatch.tools.harness import parser as harness_parser

SHAPE = (1, 192, 16, 16)


def _ms(fn: Callable[[], Any], repeats: int) -> float:
    return best_of(fn, repeats) * 1e3


def _compressai_tables() -> tuple[EntropyTables, Any]:
    """FactorizedPrior(128, 192)'s entropy bottleneck after update, with its quantiles spread so
    that channels differ (untrained, every channel would hold the same table)."""
    import torch
    from compressai.models import FactorizedPrior

    torch.manual_seed(0)
    model = FactorizedPrior(128, 192).eval()
    eb = model.entropy_bottleneck
    with torch.no_grad():
        eb.quantiles.mul_(torch.linspace(0.3, 4.0, 192)[:, None, None])
    eb.update(force=True)
    tables = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb.quantiles[:, :, 1]
    )
    return tables, eb


def main(argv: list[str] | None = None) -> int:
    parser = harness_parser("entropy", __doc__)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--tables", choices=["laplacian", "compressai"], default="laplacian")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    if args.tables == "compressai":
        tables, _ = _compressai_tables()
    else:
        tables = laplacian_tables(SHAPE[1], seed=args.seed)
    rng = np.random.default_rng(args.seed)
    # A latent like a real one: Laplacian around the medians, a few escapes.
    symbols = np.round(rng.laplace(0.0, 2.0, SHAPE)).astype(np.int32)
    symbols.reshape(-1)[rng.integers(0, symbols.size, 20)] = 300
    payload = encode(symbols, tables)
    tables.models()  # built once per set, outside the timing (as a sink caches its tables)
    assert np.array_equal(decode(payload, tables), symbols)

    reps = args.repeats
    rows: list[tuple[str, float, float | None]] = []
    ours_decode = _ms(lambda: decode(payload, tables), reps)
    ours_encode = _ms(lambda: encode(symbols, tables), max(10, reps // 10))
    digest = _ms(lambda: symbols_digest(symbols), reps)
    stage = _ms(lambda: (latent(s := decode(payload, tables), tables), symbols_digest(s)), reps)

    theirs_decode = theirs_encode = None
    note = ""
    try:
        from compressai.ans import RansDecoder, RansEncoder
    except Exception as exc:  # the tools extra is optional; say why the column is empty
        note = f"CompressAI unavailable ({type(exc).__name__}: {exc})"
    else:
        # CompressAI's own calling convention (EntropyModel.decompress): Python lists.
        cdfs = [c.tolist() for c in tables.cdfs]
        lengths = tables.cdf_lengths.tolist()
        offsets = tables.offsets.tolist()
        indexes = np.repeat(np.arange(SHAPE[1], dtype=np.int32), SHAPE[2] * SHAPE[3]).tolist()
        flat = symbols.reshape(-1).tolist()
        string = RansEncoder().encode_with_indexes(flat, indexes, cdfs, lengths, offsets)
        decoder = RansDecoder()
        back = decoder.decode_with_indexes(string, indexes, cdfs, lengths, offsets)
        assert back == flat, "CompressAI's round trip differs"
        theirs_decode = _ms(
            lambda: decoder.decode_with_indexes(string, indexes, cdfs, lengths, offsets), reps
        )
        theirs_encode = _ms(
            lambda: RansEncoder().encode_with_indexes(flat, indexes, cdfs, lengths, offsets),
            max(10, reps // 10),
        )
        note = f"CompressAI stream {len(string)} bytes"

    rows.append(("decode (payload -> symbols)", ours_decode, theirs_decode))
    rows.append(("encode (symbols -> payload)", ours_encode, theirs_encode))
    rows.append(("symbols_digest (BLAKE3)", digest, None))
    rows.append(("stage (payload -> latent + digest)", stage, None))

    print(
        f"entropy stage, {symbols.size} symbols {SHAPE}, {args.tables} tables, "
        f"best of {reps}; payload {len(payload)} bytes; {note}"
    )
    print(f"{'':36} {'ours ms':>9} {'CompressAI ms':>14} {'ratio':>7}")
    for name, ours, theirs in rows:
        other = f"{theirs:14.3f}" if theirs is not None else f"{'-':>14}"
        ratio = f"{ours / theirs:7.2f}" if theirs else f"{'-':>7}"
        print(f"{name:36} {ours:9.3f} {other} {ratio}")
    if theirs_decode:
        verdict = "met" if ours_decode <= 0.6 * theirs_decode else "NOT met"
        print(f"goal decode <= 0.6 x CompressAI: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
