"""``wai-dispatch config``: every setting's effective value and where it came from (``flag``,
``env``, ``file`` — the ``WAI_CONFIG`` TOML file —, ``handover`` or ``default``), read by the
one :func:`service.settings.load`; secrets are shown as set or not, never printed.

A setting whose default stands for a value worked out when it is used (``decode_threads`` 0:
the CPUs, shared among ``workers``; no ``database_url``: the SQLite file in the data directory;
``http`` and ``event_loop`` ``auto``: the parser and the loop ``serve`` runs on, those
installed, as ``auto: httptools``; …) shows that value, as ``serve`` and :data:`DERIVED` work
it out, with the source ``default``."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from wai_dispatch.cli.options import overrides
from wai_dispatch.cli.serve import serve_settings
from wai_dispatch.service.decoding.decoder import decoder_offer
from wai_dispatch.service.settings import CONFIG_ENV, SECRET, Settings, env_name, sources
from wai_dispatch.service.store.spool_volume import default_replica_id

#: The settings whose unset default (``None``, or ``0`` for the threads) stands for another
#: value, and that value: what the service and the decoder use.
DERIVED: dict[str, Callable[[Settings], Any]] = {
    "database_url": lambda s: s.url,  # the default SQLite file holds no secret
    # the decoder's own rule: the reference offer, a hardware GPU's path after the NPU's
    "offer": lambda s: ",".join(str(p) for p in decoder_offer(s.decoder_args()["offer"])),
    "decode_threads": lambda s: s.decode_workers,
    "spool_dir": lambda s: str(s.spool_volume),
    "replica_id": lambda s: default_replica_id(),
    "ort_threads": lambda s: len(os.sched_getaffinity(0)),  # paths/onnx.py: "else the CPUs"
    # what `serve` runs on: the parser and loop that are installed
    "http": lambda s: f"auto: {s.http_parser}",
    "event_loop": lambda s: f"auto: {s.loop_impl}",
}


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per setting: name, effective value (a secret: ``"(set)"`` or ``None``),
    source, and the environment variable that sets it."""
    chosen = serve_settings(args)  # what `serve` runs on: `--workers N` shares the CPUs
    where = sources(**overrides(args))
    out = []
    for name, value in chosen.model_dump(mode="json").items():
        unset = value in (None, "auto") or (name == "decode_threads" and value == 0)
        if name in DERIVED and unset:
            value = DERIVED[name](chosen)
        elif name in SECRET:
            value = "(set)" if value else None
        out.append({"name": name, "value": value, "source": where[name], "env": env_name(name)})
    return out


def run(args: argparse.Namespace) -> int:
    listed = rows(args)
    config_file = os.environ.get(CONFIG_ENV) or None
    if args.json:
        print(json.dumps({"config_file": config_file, "settings": listed}, indent=2))
        return 0
    print(f"# {CONFIG_ENV}: {config_file or '(none)'}")
    shown = ["(not set)" if r["value"] is None else str(r["value"]) for r in listed]
    width = min(80, max(map(len, shown)))
    for r, value in zip(listed, shown, strict=True):
        print(f"{r['name']:24} {value[:width]:{width}} {r['source']:8} {r['env']}")
    return 0
