"""``wai-dispatch serve`` (the HTTP service on uvicorn) and ``wai-dispatch tokens
create|list|revoke`` (bearer tokens in the report store). FastAPI and uvicorn are imported only
when ``serve`` runs."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path
from typing import Any


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the HTTP decoder service")
    p.add_argument("--host", help="address to listen on (WAI_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (WAI_PORT, default 8080)")
    p.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    p.add_argument("--data-dir", type=Path, help="sets, report store, spool (WAI_DATA_DIR)")
    p.set_defaults(func=run_serve)

    t = sub.add_parser("tokens", help="bearer tokens of the service (sink, operator, admin)")
    verbs = t.add_subparsers(dest="verb", metavar="VERB", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", type=Path, help="the data directory (WAI_DATA_DIR)")
    common.add_argument("--json", action="store_true", help="print JSON")
    v = verbs.add_parser("create", parents=[common], help="create a token; prints it once")
    v.add_argument("name", help="who holds it (a sink's name files its reports)")
    v.add_argument("--role", default="sink", choices=("sink", "operator", "admin"))
    v.set_defaults(func=run_create)
    v = verbs.add_parser("list", parents=[common], help="tokens (never their secrets)")
    v.set_defaults(func=run_list)
    v = verbs.add_parser("revoke", parents=[common], help="revoke a name's tokens (or an id)")
    v.add_argument("name")
    v.set_defaults(func=run_revoke)


def _settings(args: argparse.Namespace, **extra: Any) -> Any:
    from wai_dispatch.service.decoding.settings import load

    return load(data_dir=getattr(args, "data_dir", None), **extra)


def _store(args: argparse.Namespace) -> Any:
    from wai_dispatch.service.store.db import ReportStore

    settings = _settings(args)
    store = ReportStore(settings.url)
    store.migrate()
    return store


def run_create(args: argparse.Namespace) -> int:
    from wai_dispatch.service.store import tokens

    secret = tokens.create(_store(args), args.name, tokens.parse_role(args.role))
    if args.json:
        print(json.dumps({"name": args.name, "role": args.role, "token": secret}))
    else:
        print(secret)
    return 0


def run_list(args: argparse.Namespace) -> int:
    from wai_dispatch.service.store import tokens

    rows = tokens.listing(_store(args))
    if args.json:
        print(json.dumps(rows, indent=2))
    for r in [] if args.json else rows:
        state = "revoked" if r["revoked"] else "live"
        print(f"{r['id']:4}  {r['name']:32} {r['role']:9} {state}")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    from wai_dispatch.service.store import tokens

    n = tokens.revoke(_store(args), args.name)
    print(json.dumps({"revoked": n}) if args.json else f"revoked {n} token(s)")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from wai_dispatch.conformance import envelopes_dir
    from wai_dispatch.service.store.db import ReportStore
    from wai_dispatch.service.store.tokens import ADMIN_TOKEN_FILE, ensure_admin

    settings = _settings(args, host=args.host, port=args.port)
    # The workers read their settings from the environment: pass on what the flags chose.
    os.environ["WAI_DATA_DIR"] = str(settings.data_dir)
    os.environ["WAI_HOST"], os.environ["WAI_PORT"] = settings.host, str(settings.port)
    if args.workers > 1:  # N processes share the CPUs: each ONNX Runtime pool gets its part
        cpus = len(os.sched_getaffinity(0))
        os.environ.setdefault("WAI_ORT_THREADS", str(max(1, cpus // args.workers)))
        os.environ.setdefault("WAI_DECODE_THREADS", str(max(1, cpus // args.workers)))
    store = ReportStore(settings.url)
    store.migrate()
    written = ensure_admin(store, settings.data_dir)
    store.dispose()
    url = f"http://{settings.host}:{settings.port}"
    token_file = settings.data_dir / ADMIN_TOKEN_FILE
    sample = envelopes_dir() / "bmshj2018-demo-q3.json"
    print(f"wai-dispatch serving on {url}  (API docs: {url}/docs)")
    if written is not None:
        print(f"admin token written to {token_file} (mode 0600; first start)")
    elif token_file.is_file():
        print(f"admin token in {token_file}")
    else:
        print("admin token: create one with `wai-dispatch tokens create NAME --role admin`")
    print("decode the sample envelope:")
    print(
        f'  curl -s -H "Authorization: Bearer $(cat {shlex.quote(str(token_file))})" '
        f"-H 'Content-Type: application/json' --data-binary @{shlex.quote(str(sample))} "
        f"{url}/v1/decode",
        flush=True,
    )
    uvicorn.run(
        "wai_dispatch.service.http.app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=args.workers,
        log_config=None,
        access_log=False,
    )
    return 0
