"""The parser of ``explain`` (run by :mod:`cli.explain`, which checks ``--capability``
against the registry: importing the pure core here would cost ``--help`` ~60 ms)."""

from __future__ import annotations

from wai_dispatch.cli.flags import Sub, add_json, add_offer, command, runs


def add(sub: Sub) -> None:
    p = command(
        sub,
        "explain",
        "wai-dispatch explain --intent replicate\n"
        "wai-dispatch explain --offer npu/model-runtime/float cpu/wai-ops/integer --json",
    )
    p.add_argument(
        "--capability",
        default="wai.neural.bmshj2018",
        help="a capability of the registry (default wai.neural.bmshj2018; an unknown one is "
        "refused, naming those known)",
    )
    p.add_argument("--intent", default=None, help="the envelope's intent (e.g. replicate)")
    p.add_argument("--pin-tier", default=None, help="the tier token of the pin over the set")
    add_offer(p, help="paths in order (default: the reference offer)", setting=False)
    add_json(p)
    runs(p, "explain:run")
