"""The set writers' options, declared without torch: ``wai-dispatch make-set KIND --help``
(and a usage error) answers from here before the writer (``wai_bmshj2018_npu_set``,
``wai_int_synth_set``, which import the tools extra) is loaded."""

from __future__ import annotations

import argparse
from pathlib import Path

from wai_dispatch.conformance import sets_dir

DEFAULT_SEED = 20261109
DEMO_QUALITY = 3


def bmshj2018_parser(
    prog: str = "python -m wai_dispatch.tools.wai_bmshj2018_npu_set",
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    """The bmshj2018 writer's options; ``wai-dispatch make-set bmshj2018`` parses them with its
    own parser class (argument errors as one typed line)."""
    parser = parser_class(
        prog=prog,
        description="Write a wai.neural.bmshj2018 parameter set (spec §6.1).",
    )
    parser.add_argument("--out", required=True, type=Path, help="the set's directory")
    parser.add_argument("--quality", type=int, default=DEMO_QUALITY)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="draws the payload picture")
    weights = parser.add_mutually_exclusive_group()
    weights.add_argument("--checkpoint", type=Path, help="a CompressAI state dict (fp16 or fp32)")
    weights.add_argument(
        "--pretrained", action="store_true", help="CompressAI's zoo weights (needs the network)"
    )
    parser.add_argument("--licence", help="the weights' SPDX licence, for wai-usage.json")
    parser.add_argument("--name", help="the set's name (default bmshj2018[-demo]-q<quality>)")
    parser.add_argument("--force", action="store_true", help="replace an existing set")
    _update_quantiles(parser)
    return parser


def _update_quantiles(parser: argparse.ArgumentParser) -> None:
    """Both bmshj2018 writers' one rule for a checkpoint saved before update()."""
    parser.add_argument(
        "--update-quantiles",
        action="store_true",
        help="re-estimate the entropy bottleneck's quantiles before cutting the tables "
        "(CompressAI's update(force=True, update_quantiles=True)); for a checkpoint saved "
        "before update() whose bitstreams were coded after that call (docs/bmshj2018-set.md)",
    )


def int_synth_parser(
    prog: str = "python -m wai_dispatch.tools.wai_int_synth_set",
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    """The int-synth writer's options; ``wai-dispatch make-set int-synth`` parses them with
    its own parser class (argument errors as one typed line)."""

    parser = parser_class(
        prog=prog,
        description="Derive a wai.neural.int_synth set (wai-ops/1) from a float bmshj2018 set.",
    )
    parser.add_argument("--out", required=True, type=Path, help="the set's directory")
    parser.add_argument(
        "--from",
        dest="from_set",
        default=str(sets_dir() / "bmshj2018-demo-q3"),
        help="a float bmshj2018 set: its folder, or its digest (or a prefix) in the store "
        "(default: the bundled demo set)",
    )
    parser.add_argument("--data-dir", type=Path, help="where the set store lives (WAI_DATA_DIR)")
    parser.add_argument("--checkpoint", type=Path, help="its CompressAI checkpoint (default: demo)")
    parser.add_argument("--name", help="the set's name")
    parser.add_argument(
        "--profile",
        choices=("default", "int8-units"),
        default="default",
        help="bit widths: default (10-bit activations, int16 weights), or int8-units (int8 "
        "weights, 7-bit inputs to every convolution past the first; docs/int-synth-set.md)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing set")
    return parser


def hyperprior_parser(
    prog: str = "python -m wai_dispatch.tools.wai_bmshj2018_hyperprior_set",
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    """The bmshj2018-hyperprior writer's options (``wai-dispatch make-set
    bmshj2018-hyperprior``)."""
    parser = parser_class(
        prog=prog,
        description="Write a wai.neural.bmshj2018_hyperprior parameter set: the float main "
        "synthesis, and the entropy stage with an integer (wai-ops/1) hyper-synthesis.",
    )
    parser.add_argument("--out", required=True, type=Path, help="the set's directory")
    parser.add_argument("--quality", type=int, default=DEMO_QUALITY, help="1-8 (N, M by quality)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="draws the payload picture")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="a CompressAI ScaleHyperprior state dict, bare or under network/state_dict, fp16 "
        "or fp32 (default: the demo weights)",
    )
    parser.add_argument("--licence", help="the weights' SPDX licence, for wai-usage.json")
    parser.add_argument("--name", help="the set's name")
    parser.add_argument(
        "--profile",
        choices=("default", "int8-units"),
        default="default",
        help="the hyper-synthesis' bit widths: default (13-bit activations, int16 weights), or "
        "int8-units (int8 weights, 7-bit inputs to every convolution past the first; "
        "docs/bmshj2018-hyperprior-set.md)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing set")
    _update_quantiles(parser)
    return parser


#: Each ``make-set`` kind's options.
PARSERS = {
    "bmshj2018": bmshj2018_parser,
    "int-synth": int_synth_parser,
    "bmshj2018-hyperprior": hyperprior_parser,
}
