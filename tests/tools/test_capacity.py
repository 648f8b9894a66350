"""The fleet table's arithmetic (tools/capacity.py): decodes per second from sinks, cores at
the target utilisation, replicas rounded up, the store's write rate and storage."""

from __future__ import annotations

import pytest

from wai_dispatch.tools.capacity import CORES_PER_REPLICA, RETENTION_DAYS, UTILISATION, fleet_table


def test_the_fleet_table() -> None:
    rows = fleet_table(cpu_s=0.1, png_s=0.02, rows=2.0, bytes_=1500.0)
    assert [r["sinks"] for r in rows] == [10_000, 100_000, 1_000_000]
    small = rows[0]
    assert small["decodes_per_s"] == pytest.approx(10_000 / 60)
    assert small["cores"] == pytest.approx(10_000 / 60 * 0.12 / UTILISATION)
    assert small["replicas"] == -(-small["cores"] // CORES_PER_REPLICA)  # rounded up
    assert small["pg_rows_per_s"] == pytest.approx(2 * 10_000 / 60)
    assert small["gb_per_day"] == pytest.approx(10_000 / 60 * 86_400 * 1500 / 1e9)
    assert small["gb_retained"] == pytest.approx(small["gb_per_day"] * RETENTION_DAYS)
    assert rows[2]["cores"] == pytest.approx(100 * small["cores"])
