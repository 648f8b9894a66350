"""``wai-dispatch config``: every setting's effective value and where it came from (``flag``,
``env``, ``file`` — the ``WAI_CONFIG`` TOML file —, ``handover`` or ``default``), read by the
one :func:`service.decoding.settings.load`; secrets are shown as set or not, never printed."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from wai_dispatch.cli.options import overrides, settings
from wai_dispatch.service.decoding.settings import CONFIG_ENV, SECRET, env_name, sources


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per setting: name, value (a secret: ``"(set)"`` or ``None``), source, and the
    environment variable that sets it."""
    chosen = settings(args)
    where = sources(**overrides(args))
    out = []
    for name, value in chosen.model_dump(mode="json").items():
        if name in SECRET:
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
    for r in listed:
        shown = "(not set)" if r["value"] is None else str(r["value"])
        print(f"{r['name']:24} {shown[:60]:60} {r['source']:8} {r['env']}")
    return 0
