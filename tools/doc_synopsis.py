"""A usage synopsis of the docs (``<!-- doc: synopsis -->``) held to the code: each
``wai-dispatch …`` line's sub-commands and options to its ``--help``; each ``python -m MODULE``
line's module and options to its source. A line starting with ``[`` or ``-`` continues the one
above."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
from pathlib import Path

from wai_dispatch.cli.main import build_parser
from wai_dispatch.tools.doc_blocks import Block
from wai_dispatch.tools.set_writer_options import PARSERS

#: ``make-set KIND``'s options are its writer's (the module below), whose parser
#: (tools/set_writer_options.py) is the reference.
_WRITERS = {
    "bmshj2018": "wai_dispatch.tools.wai_bmshj2018_npu_set",
    "int-synth": "wai_dispatch.tools.wai_int_synth_set",
    "bmshj2018-hyperprior": "wai_dispatch.tools.wai_bmshj2018_hyperprior_set",
}
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _lines(block: Block) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for n, raw in enumerate(block.lines):
        text = raw.strip().removeprefix("$ ")
        text = re.split(r"\s#\s", text, maxsplit=1)[0]
        if not text or text.startswith("#"):
            continue
        if out and (text.startswith("[") or text.startswith("-")):
            out[-1] = (out[-1][0], f"{out[-1][1]} {text}")
        else:
            out.append((block.line + 1 + n, text))
    return out


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _check_cli(words: list[str]) -> list[str]:
    if len(words) < 2:
        return ["names no sub-command"]
    if words[1] == "make-set" and (module := _WRITERS.get(" ".join(words[2:3]))) is not None:
        return _check_module(module, " ".join(words))
    if words[1].startswith("-"):  # the command's own options (--version, --help)
        helps = build_parser([]).format_help()
        return [
            f"wai-dispatch --help lists no {o}"
            for o in _OPTION.findall(" ".join(words))
            if o not in helps
        ]
    parser = build_parser([words[1]])
    chain = [parser]
    for word in words[1:]:
        name = word.split("|")[0]
        children = _subparsers(chain[-1])
        if name in children:
            chain.append(children[name])
        elif len(chain) == 1:
            return [f"wai-dispatch has no command {name!r}"]
        else:
            break
    helps = " ".join(p.format_help() for p in chain)
    return [
        f"{' '.join(p.prog for p in chain[-1:])} --help lists no {opt}"
        for opt in _OPTION.findall(" ".join(words))
        if opt not in helps
    ]


def _check_module(module: str, text: str) -> list[str]:
    if (kind := next((k for k, m in _WRITERS.items() if m == module), None)) is not None:
        helps = PARSERS[kind]().format_help()
        return [f"{module} --help lists no {o}" for o in _OPTION.findall(text) if o not in helps]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return [f"no module {module}"]
    source = Path(spec.origin).read_text(encoding="utf-8")
    unseen = [o for o in _OPTION.findall(text) if f'"{o}"' not in source and f"'{o}'" not in source]
    helps = _help(module) if unseen else ""  # a benchmark's common options are the harness's
    return [f"{module} defines no {opt}" for opt in unseen if opt not in helps]


def _help(module: str) -> str:
    """What ``python -m MODULE --help`` prints, for a module whose ``main(argv)`` parses its
    command line (the benchmarks); empty for another."""
    main = getattr(importlib.import_module(module), "main", None)
    if main is None:
        return ""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit, TypeError):
        main(["--help"])
    return out.getvalue()


def check_synopsis(block: Block) -> list[tuple[int, str]]:
    """Each problem with the line (in the file) of the synopsis line it is about."""
    problems: list[tuple[int, str]] = []
    for line, text in _lines(block):
        words = text.split()
        head = words[0].rsplit("/", 1)[-1]
        if head == "wai-dispatch":
            found = _check_cli(words)
        elif head in ("python", "python3") and words[1:2] == ["-m"] and len(words) > 2:
            found = _check_module(words[2], text)
        else:
            found = [f"not a wai-dispatch or python -m line: {text!r}"]
        problems.extend((line, f"{p} ({text})") for p in found)
    return problems
