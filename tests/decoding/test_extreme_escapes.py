"""A payload whose escapes are INT32_MAX and INT32_MIN decodes on the reference path with no
numpy RuntimeWarning (warnings are errors in the tests): the networks may answer NaN there, and
the picture rule makes it 0 (docs/decoding.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from wai_dispatch.codec import payload as payload_codec
from wai_dispatch.codec.tables import tables_of

CAP = "wai.neural.bmshj2018"


def test_int32_extreme_escapes_decode_without_a_warning(decoder: Any) -> None:
    files = decoder.opened.loaded(decoder.set_store.default_for(CAP).digest)
    tables = tables_of(files)
    symbols = np.zeros((1, tables.channels, 4, 4), dtype=np.int64)
    symbols[0, :, 0, 0] = 2**31 - 1
    symbols[0, :, 1, 1] = -(2**31)
    result = decoder.decode_payload(payload_codec.encode(symbols, tables), capability=CAP)
    assert result.reports[-1].ran is not None
    assert result.rgb.shape == (64, 64, 3) and result.rgb.dtype == np.uint8
