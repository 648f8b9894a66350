"""Issue 29, item 8: statuses by class. A set archive that lacks a file its manifest lists, or
an empty tar, is malformed input: 422 ``set_archive_invalid`` naming the problem (it was 404
``set_file_missing``, the status of a resource the server lacks)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from wai_dispatch.conformance import sets_dir


def _tar(folder: Path | None, leave_out: str | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        if folder is not None:
            for path in sorted(folder.iterdir()):
                if path.name != leave_out:
                    tar.add(path, arcname=path.name)
    return out.getvalue()


def test_an_incomplete_or_empty_archive_is_422(app_service: Any) -> None:
    folder = Path(sets_dir()) / "int-synth-demo-q3"
    listed = next(p.name for p in sorted(folder.iterdir()) if p.name != "set.json")
    headers = {"Content-Type": "application/x-tar"}
    with app_service.client("admin") as client:
        for body, named in ((_tar(folder, leave_out=listed), listed), (_tar(None), None)):
            r = client.post("/v1/sets", content=body, headers=headers)
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["code"] == "set_archive_invalid", r.text
            if named is not None:
                assert named in error["message"]
