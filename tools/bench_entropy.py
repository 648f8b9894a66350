"""Benchmark of the entropy stage (§6.3): a 1 × 192 × 16 × 16 latent decoded by ours
(constriction) beside CompressAI's C++ rANS on the same tables and symbols, best of N."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from wai_dispatch.codec.payload import decode, encode, latent, symbols_digest
from wai_dispatch.codec.tables import EntropyTables, laplacian_tables
from wai_dispatch.tools.harness import best_of, met, parser, table

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
    p = parser("entropy", __doc__, repeats=200)
    p.add_argument("--tables", choices=["laplacian", "compressai"], default="laplacian")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

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

    print(
        f"entropy stage, {symbols.size} symbols {SHAPE}, {args.tables} tables, "
        f"best of {reps}; payload {len(payload)} bytes; {note}"
    )
    rows = [
        ("decode (payload -> symbols)", ours_decode, theirs_decode),
        ("encode (symbols -> payload)", ours_encode, theirs_encode),
        ("symbols_digest (BLAKE3)", digest, None),
        ("stage (payload -> latent + digest)", stage, None),
    ]
    table(
        ["", "ours ms", "CompressAI ms", "ratio"],
        ([n, ours, theirs or "-", ours / theirs if theirs else "-"] for n, ours, theirs in rows),
        "- .3f .3f .2f",
    )
    if theirs_decode:
        print(f"goal decode <= 0.6 x CompressAI: {met(ours_decode <= 0.6 * theirs_decode)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
