"""Entropy tables: JSON round trip, validation (one typed error per defect, naming the channel),
CompressAI's layout, and constriction reproducing each 16-bit table exactly."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import numpy as np
import pytest

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.tables import EntropyTables, TablesError, _verify_model, laplacian_tables
from wai_dispatch.setfacts.limits import Limits


def _doc(tables: EntropyTables) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(tables.to_json())
    return doc


def test_json_round_trip_is_canonical_and_exact() -> None:
    tables = laplacian_tables(16, seed=1)
    data = tables.to_json()
    again = EntropyTables.from_json(data)
    assert again == tables
    assert again.to_json() == data
    # float32 medians survive the decimal form bit for bit
    assert again.medians.tobytes() == tables.medians.tobytes()
    assert again.medians.dtype == np.float32 and again.offsets.dtype == np.int32
    # whitespace and key order do not matter on input
    loose = json.dumps(json.loads(data), indent=2).encode()
    assert EntropyTables.from_json(loose) == tables
    assert data.endswith(b"\n") and b" " not in data


def test_arrays_are_read_only() -> None:
    tables = laplacian_tables(2, seed=1)
    with pytest.raises(ValueError):
        tables.cdfs[0][1] = 5
    with pytest.raises(ValueError):
        tables.offsets[0] = 5


def test_the_layout_is_compressais() -> None:
    tables = laplacian_tables(4, seed=2)
    for c in range(tables.channels):
        cdf = tables.cdfs[c]
        assert cdf.shape == (tables.cdf_lengths[c],)
        assert cdf[0] == 0 and cdf[-1] == 65536
        assert tables.frequencies(c).shape == (tables.cdf_lengths[c] - 1,)


def _mutate(path: str, value: Any) -> bytes:
    doc = _doc(laplacian_tables(3, seed=4))
    target = doc
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[int(k)] if isinstance(target, list) else target[k]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    elif value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return json.dumps(doc).encode()


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("cdfs.1.0", 1, "channel 1"),  # does not start at 0
        ("cdfs.2.-1", 65535, "channel 2"),  # does not end at 1 << 16
        ("cdfs.0.2", 0, "channel 0"),  # not strictly increasing (a zero-frequency bin)
        ("cdfs.1.1", 1.5, "cdfs[1]"),  # not an integer
        ("cdfs.1.1", True, "cdfs[1]"),
        ("cdf_lengths.0", 7, "channel 0"),  # length disagrees with the CDF
        ("cdf_lengths.1", 2, "channel 1"),  # no room for a value and the escape
        ("offsets.2", 2**31 - 3, "channel 2"),  # values overflow int32
        ("offsets.2", -(2**31) - 1, "channel 2"),
        ("medians.1", "nan", "medians"),
        ("medians.0", 1e39, "channel 0"),  # finite in JSON, infinite as float32
        ("channels", 4, "channels"),  # count disagrees with the arrays
        ("channels", 0, "channels"),
        ("precision", 15, "precision"),
        ("format", "other/1", "format"),
        ("medians", _DELETE, "missing"),
        ("extra", 1, "unknown"),
    ],
)
def test_invalid_tables_are_refused_by_name(path: str, value: Any, needle: str) -> None:
    with pytest.raises(TablesError) as info:
        EntropyTables.from_json(_mutate(path, value))
    assert info.value.code == "tables_invalid"
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b"\xff\xfe", "null", b'{"a":' * 5000])
def test_non_json_is_a_typed_error(data: bytes | str) -> None:
    with pytest.raises(TablesError):
        EntropyTables.from_json(data)


def test_nan_median_in_json_is_refused() -> None:
    """NaN is not JSON: the strict reader refuses it before any channel is read."""
    data = _mutate("medians.1", 0.0).replace(b"0.0", b"NaN", 1)
    with pytest.raises(TablesError, match="NaN is not a JSON number"):
        EntropyTables.from_json(data)


def test_channel_limit() -> None:
    data = laplacian_tables(5, seed=0).to_json()
    with pytest.raises(TablesError, match="limit"):
        EntropyTables.from_json(data, limits=Limits(max_channels=4))


def test_tables_error_is_a_codec_error() -> None:
    assert issubclass(TablesError, CodecError)


def test_constriction_reproduces_each_table_exactly() -> None:
    # Includes the extremes: single-count bins beside a dominant one, and the full 2^16 support.
    skew = np.ones(1000, dtype=np.int64)
    skew[0] = 65536 - 999
    cdfs = (
        np.concatenate(([0], np.cumsum(skew))),
        np.arange(65537),
        np.array([0, 1, 65536]),
        np.array([0, 65535, 65536]),
    )
    tables = EntropyTables(
        cdfs=cdfs,
        cdf_lengths=np.array([len(c) for c in cdfs]),
        offsets=np.zeros(4, dtype=np.int64),
        medians=np.zeros(4),
    )
    assert len(tables.models()) == 4
    assert len(laplacian_tables(64, seed=5).models()) == 64


def test_the_exactness_check_can_fail() -> None:
    import constriction

    freqs = np.array([1000, 30000, 34536], dtype=np.int64)
    wrong = constriction.stream.model.Categorical(np.array([0.2, 0.3, 0.5]), perfect=True)
    with pytest.raises(TablesError) as info:
        _verify_model(wrong, freqs, 7)
    assert info.value.code == "tables_unsupported" and "channel 7" in str(info.value)


@pytest.mark.tools
@pytest.mark.skipif(
    importlib.util.find_spec("compressai") is None or importlib.util.find_spec("torch") is None,
    reason="needs the tools extra (torch, CompressAI) for a real EntropyBottleneck",
)
def test_from_compressai_entropy_bottleneck() -> None:
    import torch
    from compressai.entropy_models import EntropyBottleneck

    torch.manual_seed(0)
    eb = EntropyBottleneck(24)
    with torch.no_grad():  # give channels different shapes than the initial identical ones
        eb.quantiles.mul_(torch.linspace(0.5, 3.0, 24)[:, None, None])
    eb.update(force=True)
    tables = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb.quantiles[:, :, 1]
    )
    assert tables.channels == 24
    padded = eb._quantized_cdf.numpy()
    for c in range(24):
        n = int(eb._cdf_length[c])
        assert np.array_equal(tables.cdfs[c], padded[c, :n])
    assert np.array_equal(tables.offsets, eb._offset.numpy())
    assert tables.medians.tobytes() == eb.quantiles[:, 0, 1].detach().numpy().tobytes()
    tables.models()
    assert EntropyTables.from_json(tables.to_json()) == tables
