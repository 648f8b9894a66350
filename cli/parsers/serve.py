"""The parsers of ``serve`` and ``tokens create|list|revoke`` (run by :mod:`cli.serve`)."""

from __future__ import annotations

from wai_dispatch.cli.flags import Sub, add_data_dir, command, runs, setting_flags, verb_options


def add(sub: Sub) -> None:
    _add_serve(sub)
    _add_tokens(sub)


def _add_serve(sub: Sub) -> None:
    p = command(
        sub,
        "serve",
        "wai-dispatch serve --host 0.0.0.0 --port 8080 --workers 4\n"
        "wai-dispatch serve --ray 10.0.0.5:6379 --autoscale 2:8 --port 8000",
    )
    p.add_argument("--host", help="address to listen on (WAI_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (WAI_PORT, default 8080)")
    p.add_argument("--workers", type=int, help="server processes (WAI_WORKERS, default 1)")
    add_data_dir(p, "sets, report store, spool (WAI_DATA_DIR)")
    setting_flags(p, "host", "port", "workers")
    ray = p.add_argument_group("on a Ray cluster (the ray extra; docs/ray.md)")
    ray.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="deploy on the Ray cluster at ADDRESS (HOST:PORT of its head) as a Ray "
        "Serve application; its HTTP proxy listens on --host/--port",
    )
    scale = ray.add_mutually_exclusive_group()
    scale.add_argument("--replicas", type=int, metavar="N", help="replicas (default 1)")
    scale.add_argument(
        "--autoscale", metavar="MIN:MAX", help="replicas from MIN to MAX, on ongoing requests"
    )
    ray.add_argument(
        "--replica-cpus",
        type=float,
        metavar="C",
        help="Ray CPUs of a replica, and its decode threads (default 1)",
    )
    ray.add_argument(
        "--detach", action="store_true", help="return once deployed (`serve shutdown` removes it)"
    )
    runs(p, "serve:run_serve")


def _add_tokens(sub: Sub) -> None:
    t = command(sub, "tokens", "wai-dispatch tokens create kiosk-01\nwai-dispatch tokens list")
    verbs = t.add_subparsers(dest="verb", metavar="VERB", required=True)
    common = verb_options("the data directory (WAI_DATA_DIR)")
    v = command(
        verbs,
        "create",
        "wai-dispatch tokens create kiosk-01 > kiosk-01.token\n"
        "wai-dispatch tokens create ops --role operator",
        help="create a token; prints it once",
        parents=[common],
    )
    v.add_argument("name", help="who holds it (a sink's name files its reports)")
    v.add_argument("--role", default="sink", choices=("sink", "operator", "admin"))
    runs(v, "serve:run_create")
    v = command(
        verbs,
        "list",
        "wai-dispatch tokens list --json",
        help="tokens (never their secrets)",
        parents=[common],
    )
    runs(v, "serve:run_list")
    v = command(
        verbs,
        "revoke",
        "wai-dispatch tokens revoke kiosk-01",
        help="revoke a name's tokens (or an id)",
        parents=[common],
    )
    v.add_argument("name")
    runs(v, "serve:run_revoke")
