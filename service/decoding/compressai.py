"""``import-compressai``: CompressAI's own bitstream file (docs/interop.md) turned into an
envelope for a set. The set is the one named, else the installed set of the capability whose
model and quality are the file's — one of the user's own before a bundled one, the default
among several — and the result says which and why; the file's model and quality are checked
against the set's before anything is decoded, and the latent's shape against the limits before
anything of its size is allocated."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from wai_dispatch.codec import payload
from wai_dispatch.codec.compressai_rans import (
    HYPERPRIOR_REFUSAL,
    CompressAIHyperpriorError,
    CompressAIStreamError,
    decode_string,
    load_compressed,
)
from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.errors import check_latent_shape
from wai_dispatch.codec.sets import LoadedSet, SetError
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.service.decoding.prepare import OpenedSets
from wai_dispatch.service.decoding.results import ImportResult
from wai_dispatch.setfacts.limits import Limits

#: CompressAI's name of the model each capability decodes (the file's ``model``).
MODELS = {"wai.neural.bmshj2018": "bmshj2018-factorized"}
DEFAULT_CAPABILITY = "wai.neural.bmshj2018"
HYPERPRIOR = "wai.neural.bmshj2018_hyperprior"


class SetFactsMismatch(SetError):
    """a set whose model or quality is not the one the input was coded with"""

    code = "set_facts_mismatch"


def import_compressai(
    sets: OpenedSets,
    bundled: Collection[str],
    limits: Limits,
    data: bytes,
    *,
    set_digest: str | None = None,
    capability: str | None = None,
) -> ImportResult:
    """CompressAI's own bitstream file as an envelope for a set of ``sets`` (``bundled``: the
    digests of the bundled ones, chosen after the user's own), its latent held to ``limits``."""
    string, (height, width), meta = load_compressed(data)
    if capability == HYPERPRIOR:
        raise CompressAIHyperpriorError(HYPERPRIOR_REFUSAL)
    if set_digest is not None:
        files = sets.loaded(set_digest)
        if files.capability == HYPERPRIOR or "hyperprior" in (files.facts.model_extra or {}):
            raise CompressAIHyperpriorError(HYPERPRIOR_REFUSAL)
        _check_facts(files, meta)
        chosen = "named with --set"
    else:
        files, chosen = _matching_set(sets, bundled, capability or _capability_of(meta), meta)
    tables = tables_of(files)
    shape = (tables.channels, height, width)
    check_latent_shape(shape, limits, what="the bitstream's latent")
    try:
        symbols = decode_string(string, tables, shape)[None]
    except CompressAIStreamError as exc:
        raise CompressAIStreamError(
            f"{exc.message}; the set may not be the one the string was coded with "
            f"(set {files.name} {files.digest[:16]}…): name the right one with --set, or, if "
            "the set was written from a checkpoint saved before net.update() and the strings "
            "were coded after net.update(update_quantiles=True), write it again with "
            "`wai-dispatch make-set bmshj2018 --checkpoint FILE --update-quantiles`; or, if "
            "these are y's strings of a hyperprior (ScaleHyperprior.compress()), they are not "
            "imported: encode the picture with the hyperprior set instead (docs/interop.md)"
        ) from None
    body = payload.encode(symbols, tables)
    envelope = Envelope(capability=files.capability, payload=body, set=files.digest)
    return ImportResult(
        envelope,
        files.digest,
        files.name,
        files.capability,
        tuple(int(d) for d in symbols.shape),
        payload.symbols_digest(symbols),
        len(body),
        chosen,
    )


def _capability_of(meta: dict[str, Any]) -> str:
    model = meta.get("model")
    for capability, name in MODELS.items():
        if name == model:
            return capability
    return DEFAULT_CAPABILITY


def _mismatch(files: LoadedSet, meta: dict[str, Any]) -> str | None:
    """Why the set does not fit the file (``None``: it fits, as far as both say)."""
    model = meta.get("model")
    expected_model = files.facts.model or MODELS.get(files.capability)
    if model is not None and expected_model is not None and model != expected_model:
        return f"the file was coded with {model!r}; set {files.name} is {expected_model!r}"
    quality = meta.get("quality")
    if quality is not None and files.facts.quality is not None and quality != files.facts.quality:
        return (
            f"the file was coded at quality {quality!r}; set {files.name} "
            f"({files.digest[:16]}…) is quality {files.facts.quality}"
        )
    return None


def _check_facts(files: LoadedSet, meta: dict[str, Any]) -> None:
    why = _mismatch(files, meta)
    if why is not None:
        raise SetFactsMismatch(why)


def _matching_set(
    sets: OpenedSets, bundled: Collection[str], capability: str, meta: dict[str, Any]
) -> tuple[LoadedSet, str]:
    """The installed set of ``capability`` whose model and quality are the file's, and why it
    was chosen: the one of the user's own sets (not bundled) that fits, else the one bundled
    set that does; among several, the default (``sets default``) if it is one of them, else an
    error that names them; none is an error that says why the default does not fit."""
    store = sets.store
    defaults = store.defaults()
    fitting: list[LoadedSet] = []
    for installed in store.list():
        if installed.capability != capability:
            continue
        try:
            files = sets.loaded(installed.digest)
        except SetError:
            continue  # a damaged set is not a candidate
        if _mismatch(files, meta) is None:
            fitting.append(files)
    what = _what(meta)
    own = [f for f in fitting if f.digest not in bundled]
    for group, kind in ((own, "installed"), (fitting, "bundled")):
        if len(group) == 1:
            return group[0], f"the one {kind} set of {capability} for {what}"
        if group:
            chosen = [f for f in group if f.digest == defaults.get(capability)]
            if chosen:
                return chosen[0], f"the default set of {capability}, among {len(group)} for {what}"
            names = ", ".join(f"{f.name} {f.digest[:12]}" for f in group)
            raise SetFactsMismatch(
                f"several installed sets fit the file ({names}): name one with --set"
            )
    try:
        default = sets.loaded(store.default_for(capability).digest)
    except SetError:
        default = None
    if default is not None:
        _check_facts(default, meta)
    raise SetFactsMismatch(f"no installed set of {capability} fits the file ({what})")


def _what(meta: dict[str, Any]) -> str:
    parts = [str(meta["model"])] if meta.get("model") is not None else []
    if meta.get("quality") is not None:
        parts.append(f"quality {meta['quality']}")
    return ", ".join(parts) or "the file"
