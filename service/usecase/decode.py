"""The decode use case: an envelope's bytes, their media type, the sink and the limits in; a
typed outcome out (:class:`DecodeDone` or :class:`NoPathFound`), every report already recorded.
``POST /v1/decode`` (and so each Ray replica, which serves the same app) calls :func:`decode`;
the CLI's local decode calls :func:`decode_here`. Both run the same two steps:

1. :func:`prepare`: the envelope parsed against the decoder's limits, each part's payload
   header read and set opened once (:meth:`Decoder.prepare`), and the cost estimated from the
   headers (:func:`service.decoding.prepare.estimate`);
2. :func:`run`, once the estimate is admitted (the service's :class:`Gate`: its queue, memory
   budget and timeouts; the CLI holds the estimate to the service's limits and runs at once):
   the decode, the records of its reports (:func:`service.store.records.records_for`: each
   ``dispatch.Report`` becomes one typed :class:`ReportRecord`, serialised once), handed to
   the recorder in one call, and the picture made in the decode's own thread (PNG, or the
   RGB8 samples as they are) while they commit (with group commit, in the transaction they
   share with concurrent decodes: service/store/recorder.py); the outcome is returned
   once they are durable and carries the ids they are stored under (a retried request, its
   ``request_id`` sent again, the first decode's: one report per request). The gate's
   calibration and the meter are told afterwards, off the decode's thread.

A typed error of the request (bad input, a limit, the store that cannot record) propagates as
it is raised: the HTTP layer answers it by its class, the CLI prints it and exits by its kind.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

import anyio

from wai_dispatch.codec import envelope
from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.dispatch import Report
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.prepare import Estimate, Prepared, estimate
from wai_dispatch.service.decoding.results import DecodeResult, NoPath, PartResult
from wai_dispatch.service.store.records import ReportRecord, records_for, request_digest

log = logging.getLogger("wai_dispatch.decode")
T = TypeVar("T")

#: How the envelope's bytes are written: JSON, CBOR, or ``None``: told apart by their first
#: byte (a file named on the command line).
Format = Literal["json", "cbor"] | None
#: The picture the outcome carries: PNG, or the RGB8 samples row by row.
Picture = Literal["png", "rgb"]


@dataclass(frozen=True)
class DecodeRequest:
    """One decode asked for: the envelope's bytes and their format, who asks (``sink``, the
    name its reports are filed under) and the request's id, and the picture wanted."""

    body: bytes
    format: Format
    sink: str
    request_id: str
    picture: Picture = "png"

    @functools.cached_property
    def digest(self) -> str:
        """What it asks, as its reports keep it (made in a worker thread, once)."""
        return request_digest(self.format, self.body)


class RecordWriter(Protocol):
    """Where a decode's records go (:class:`service.store.recorder.Recorder`): one call per
    decode, ``begin``, handing them over and returning a function that returns once they are
    durable (stored or spooled), with the records as stored (a retried request's carry the
    first decode's ids); either raises a typed error when it cannot take them."""

    def begin(self, records: list[ReportRecord]) -> Callable[[], list[ReportRecord]]: ...


class Gate(Protocol):
    """What admits a decode (:class:`service.http.admission.Admission`): ``run`` calls ``fn``
    in a worker thread once ``est`` is admitted, or raises a typed error; ``measured`` is told
    each decode's running time."""

    def run(self, est: Estimate, fn: Callable[[], T]) -> Awaitable[T]: ...

    def measured(self, pixels: int, took: float) -> None: ...


class Meter(Protocol):
    """What counts decodes (:class:`service.http.metrics.Metrics`): told each decode that
    was not refused, once its reports are stored, with the seconds since the request was
    handed to :func:`decode` (queueing included)."""

    def decode_done(self, outcome: DecodeDone | NoPathFound, seconds: float) -> None: ...


class _Recorded:
    """An outcome with its recorded reports: their JSON forms and ids, as the answer gives them."""

    records: list[ReportRecord]

    @property
    def reports(self) -> list[dict[str, object]]:
        return [r.report for r in self.records]

    @property
    def report_ids(self) -> list[str]:
        return [r.id for r in self.records]


@dataclass(frozen=True)
class DecodeDone(_Recorded):
    """A path ran: the result, its records (primary first; the last one's path ran) and the
    picture's bytes as the request asked for them."""

    result: DecodeResult
    records: list[ReportRecord]
    picture: bytes
    #: The decode's running seconds, and its time in the worker pool: with its records
    #: stored and its picture made.
    decode_seconds: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class NoPathFound(_Recorded):
    """No offered path decodes the envelope (or only its sets are missing): the error and the
    records of every report, already recorded."""

    error: NoPath
    records: list[ReportRecord]

    @property
    def code(self) -> str:
        return self.error.code

    @property
    def symbols_digest(self) -> str | None:
        return self.error.parts[-1].symbols_digest if self.error.parts else None


Outcome = DecodeDone | NoPathFound


@dataclass(frozen=True)
class PreparedRequest:
    """A request :func:`prepare` read: its envelope prepared and its estimate."""

    request: DecodeRequest
    prepared: Prepared
    estimate: Estimate
    #: The set each part names, by capability (``None``: the store's default).
    named_sets: dict[str, str | None]


def prepare(
    decoder: Decoder, request: DecodeRequest, vet: Callable[[DecodeRequest], None] | None = None
) -> PreparedRequest:
    """Step 1: ``vet`` the request (its id not another request's), parse, prepare and estimate
    (raises the request's typed error)."""
    if vet is not None:
        vet(request)
    parsed = _parse(decoder, request)
    prepared = decoder.prepare(parsed)
    named = {p.capability: p.set for p in parsed.parts()}
    return PreparedRequest(request, prepared, estimate(prepared), named)


def run(
    decoder: Decoder, ready: PreparedRequest, recorder: RecordWriter | None
) -> DecodeDone | NoPathFound:
    """Step 2: decode, record every report (``recorder``, one call; ``None``: kept, not
    recorded), and make the picture."""
    t0 = time.perf_counter()
    try:
        result = decoder.decode(ready.prepared)
    except NoPath as exc:
        records = _records(exc.reports, exc.parts, None, t0, ready)
        if recorder is not None:
            records = recorder.begin(records)()
        return NoPathFound(exc, records)
    took = time.perf_counter() - t0
    records = _records(result.reports, [result.part], result.rgb_digest, t0, ready)
    durable = recorder.begin(records) if recorder is not None else lambda: records
    # the answer is made here, in the decode's thread, while the records commit (group
    # commit: the batch's window and its transaction): RGB8 as it is, else the PNG
    picture = result.rgb.tobytes() if ready.request.picture == "rgb" else result.png()
    records = durable()  # answered only once they are durable
    seconds = time.perf_counter() - t0
    return DecodeDone(result, records, picture, took, seconds)


async def decode(
    decoder: Decoder,
    request: DecodeRequest,
    *,
    gate: Gate,
    recorder: RecordWriter,
    meter: Meter | None = None,
    vet: Callable[[DecodeRequest], None] | None = None,
) -> Outcome:
    """The service's decode: :func:`prepare` in a worker thread, then :func:`run` as ``gate``
    admits it; once it is done, ``gate`` is told the decode's time and ``meter`` the outcome.
    A typed error on the way raises (the gate's own included: a full queue, a timeout)."""
    started = time.perf_counter()
    ready = await anyio.to_thread.run_sync(prepare, decoder, request, vet)
    outcome = await gate.run(ready.estimate, lambda: run(decoder, ready, recorder))
    if isinstance(outcome, DecodeDone):
        gate.measured(ready.estimate.pixels, outcome.decode_seconds)  # calibrates the time
    _log(request, outcome)
    if meter is not None:
        meter.decode_done(outcome, time.perf_counter() - started)
    return outcome


def decode_here(
    decoder: Decoder,
    request: DecodeRequest,
    *,
    check: Callable[[Estimate], None] | None = None,
    recorder: RecordWriter | None = None,
) -> Outcome:
    """A decode in this thread (the CLI's): :func:`prepare`, ``check`` (the service's limits,
    :func:`service.decoding.prepare.check_estimate`; ``None``: none), then :func:`run`."""
    ready = prepare(decoder, request)
    if check is not None:
        check(ready.estimate)
    outcome = run(decoder, ready, recorder)
    _log(request, outcome)
    return outcome


def local_request(body: bytes) -> DecodeRequest:
    """A request for a decode in this process (the CLI's), filed under the sink ``local``: the
    format told from the bytes, a fresh request id."""
    return DecodeRequest(body, None, "local", str(uuid.uuid4()))


def _parse(decoder: Decoder, request: DecodeRequest) -> Envelope:
    if request.format == "json":
        return envelope.parse_json(request.body, limits=decoder.limits)
    if request.format == "cbor":
        return envelope.parse_cbor(request.body, limits=decoder.limits)
    return envelope.parse(request.body, limits=decoder.limits)


def _log(request: DecodeRequest, outcome: DecodeDone | NoPathFound) -> None:
    extra: dict[str, object] = {"request_id": request.request_id, "sink": request.sink}
    if isinstance(outcome, NoPathFound):
        log.info("decode", extra={**extra, "outcome": "no_path"})
        return
    last = outcome.records[-1]
    log.info(
        "decode",
        extra={**extra, "outcome": "decoded", "path": last.path_ran, "ms": last.duration_ms},
    )


def _records(
    reports: list[Report],
    parts: list[PartResult],
    rgb_digest: str | None,
    t0: float,
    ready: PreparedRequest,
) -> list[ReportRecord]:
    """The records of a decode's reports; a part the entropy stage never reached (its set not
    installed, or a primary that had no path) has the set the envelope named, if any."""
    facts = {p.capability: (p.set_digest, p.symbols_digest) for p in parts}
    given, request = ready.named_sets, ready.request
    return records_for(
        reports,
        request_id=request.request_id,
        sink=request.sink,
        set_digests=[facts.get(r.capability, (given.get(r.capability), ""))[0] for r in reports],
        symbols_digests=[facts.get(r.capability, (None, None))[1] for r in reports],
        rgb_digest=rgb_digest,
        duration_ms=(time.perf_counter() - t0) * 1000,
        request_digest=request.digest,
    )
