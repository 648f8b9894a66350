"""``wai-dispatch verify`` for an integer set (a ``wai-ops`` program; the rest of ``verify`` is
:mod:`.verify`'s): the program loads whole (format, weights, the bound rule), the set's payload
decodes on ``cpu/wai-ops/integer``, and every payload of a conformance corpus made for this set
decodes to its hashes, exactly — the agreement decode-equivalence promises (spec §6.4, §8)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.picture import rgb_digest
from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.paths.job import SetFiles
from wai_dispatch.paths.waiops import choose
from wai_dispatch.paths.waiops.adapter import CPU_WAI_OPS_NAME, WaiOpsAdapter, load_set_program
from wai_dispatch.setfacts.limits import Limits


def corpora_for(digest: str, folders: Iterable[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """The corpora (``corpus.json`` folders) that name this set."""
    found = []
    for folder in folders:
        doc_path = folder / "corpus.json"
        if doc_path.is_file():
            doc = strictjson.loads(doc_path.read_bytes())
            if doc.get("set") == digest:
                found.append((folder, doc))
    return found


def verify_integer_set(
    set_files: SetFiles,
    tables: Any,
    corpora: Iterable[Path],
    adapter: WaiOpsAdapter | None = None,
    waiops_engine: str = "auto",
) -> list[dict[str, Any]]:
    """One row per check: ``check``, ``ok`` and what was compared; the corpus runs on the
    engine ``waiops_engine`` asks for (the verifying decoder's)."""

    rows: list[dict[str, Any]] = []
    try:
        program = load_set_program(set_files)
    except WaiError as exc:
        return [{"check": "program", "ok": False, "reason": f"{exc.code}: {exc.message}"}]
    rows.append(
        {
            "check": "program",
            "ok": True,
            "operations": program.operation_count,
            "largest": program.largest,
        }
    )
    engine = choose.build(program, CPU_WAI_OPS_NAME, waiops_engine)
    for folder, doc in corpora_for(set_files.digest, corpora):
        for case in doc["payloads"]:
            row: dict[str, Any] = {"check": "corpus", "payload": case["name"]}
            try:
                body = (folder / case["payload"]).read_bytes()
                symbols = codec_payload.decode(body, tables, limits=Limits())
                rgb = engine.run(symbols)[0].transpose(1, 2, 0).astype(np.uint8)
            except (OSError, WaiError) as exc:
                row.update(ok=False, reason=str(exc))
                rows.append(row)
                continue
            got = rgb_digest(rgb)
            row.update(
                expected=case["rgb8_blake3"],
                got=got,
                ok=got == case["rgb8_blake3"]
                and codec_payload.symbols_digest(symbols) == case["symbols_digest"],
            )
            rows.append(row)
    return rows
