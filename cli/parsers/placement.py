"""The parsers of ``paths`` and ``plan`` (run by :mod:`cli.placement`)."""

from __future__ import annotations

from wai_dispatch.cli.flags import Sub, add_data_dir, add_json, add_offer, command, runs


def add(sub: Sub) -> None:
    p = command(
        sub,
        "paths",
        "wai-dispatch paths\nwai-dispatch paths --offer gpu/wgsl/integer cpu/onnx-runtime/float",
    )
    add_offer(
        p,
        help="the offer, in order (default: WAI_OFFER or the reference offer); "
        "paths outside it are listed too, marked not offered",
    )
    add_json(p)
    runs(p, "placement:run_paths")

    q = command(
        sub,
        "plan",
        "wai-dispatch plan\nwai-dispatch plan --path cpu/onnx-runtime/float --latent-shape "
        "1,192,16,16",
    )
    which = q.add_mutually_exclusive_group()
    which.add_argument(
        "--set",
        metavar="DIGEST",
        help="a set in the store, by digest or a prefix of one (default: the store's "
        "default set for --capability)",
    )
    which.add_argument("--set-dir", metavar="DIR", help="a set directory")
    q.add_argument(
        "--path",
        default=None,
        metavar="UNIT/BACKEND/ARITH",
        help="the path to ask (default: the first path of the offer present here)",
    )
    q.add_argument(
        "--capability",
        default="wai.neural.bmshj2018",
        help="the capability whose default set --set falls back to",
    )
    q.add_argument(
        "--latent-shape",
        metavar="N,C,H,W",
        help="the latent to ask about (default: the program's fixed input, else the set's facts)",
    )
    add_offer(q)
    add_data_dir(q)
    add_json(q)
    runs(q, "placement:run_plan")
