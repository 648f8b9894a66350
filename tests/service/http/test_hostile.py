"""Issue 16, item 8: the project's own hostile suite for the HTTP service, in process (httpx's
ASGITransport). Generated bodies, queries, path segments and headers for every route that reads
client input, each sent with every role's token (sink, operator, admin), none and a garbage one.
Each test runs on SQLite and on PostgreSQL (issue 29). Every answer must be below 500 (the
documented 503s aside, which should not occur here), every 4xx must be
``{"error": {"code", "message"}}`` with a registered code, and no body may name a server path
(the data directory, the repository, ``/tmp/``, ``site-packages``).

``WAI_FUZZ_EXAMPLES`` examples per test (default 25, the whole file about 80 s here, both stores);
``make fuzz`` runs this file too, with ``WAI_FUZZ_EXAMPLES=100000``."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import cbor2
import httpx
import pytest
from _svc import SAMPLE_CBOR, SAMPLE_JSON, InProcess, cursor_params, in_process, pg_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wai_dispatch.tools.error_registry import is_registered as is_code

EXAMPLES = int(os.environ.get("WAI_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
)
ROLES = ("sink", "operator", "admin", None, "garbage")
#: The 503s the service documents (none should occur here: no fault is injected).
DOCUMENTED_503 = {"report_spool_failed", "queue_timeout", "set_damaged", "policy_busy"}
REPO = Path(__file__).resolve().parents[3]
EXAMPLES_DIR = REPO / "docs" / "examples"
RUN_REPORT = {**json.loads((EXAMPLES_DIR / "run-report.json").read_text()), "sink": "sink-a"}
POLICY = (EXAMPLES_DIR / "policy.yaml").read_text()
SAMPLE = json.loads(SAMPLE_JSON.read_bytes())
SAMPLE_CBOR_BYTES = SAMPLE_CBOR.read_bytes()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcess]:
    """The service on each store (issue 29: the same answers on both)."""
    root = tmp_path_factory.mktemp("hostile") / "data"
    if request.param == "sqlite":
        with in_process(root) as running:
            yield running
        return
    with (
        pg_database(request.getfixturevalue("postgres")) as url,
        in_process(root, database_url=url) as running,
    ):
        yield running


@pytest.fixture(scope="module")
def client(live: InProcess) -> Iterator[Any]:
    """One client without a token: each request names its own Authorization."""
    with live.client(None) as c:
        yield c


@pytest.fixture(scope="module")
def installed(live: InProcess) -> list[str]:
    """The digests of the sets installed in the data directory (the page's routes read them)."""
    with live.client("sink") as c:
        return [s["digest"] for s in c.get("/v1/sets").json()["sets"]]


def _check(live: InProcess, r: httpx.Response, sent: str = "") -> None:
    """One answer: below 500, a registered error for a 4xx, no server path in the body."""
    what = f"{r.request.method} {r.request.url} -> {r.status_code}: {r.text[:400]}"
    code = None
    if r.status_code >= 400:
        body = r.json()
        assert set(body["error"]) >= {"code", "message"}, what
        code = body["error"]["code"]
        assert is_code(code), what
        assert isinstance(body["error"]["message"], str) and body["error"]["message"], what
    assert r.status_code < 500 or (r.status_code == 503 and code in DOCUMENTED_503), what
    text = r.content.decode("utf-8", "replace")
    root = live.service.settings.data_dir
    sent = sent + str(r.request.url)
    for form in {str(root), str(root.resolve()), str(REPO), "/tmp/", "site-packages"}:
        if form not in sent:  # an echo of the client's own input is not a leak
            assert form not in text, what


# --- strategies -----------------------------------------------------------------------------

printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
texts = st.text(max_size=40)
big_ints = st.integers(min_value=-(10**40), max_value=10**40) | st.sampled_from(
    [2**63, -(2**63) - 1, 2**64, 10**20, int("9" * 30)]
)
scalars = st.none() | st.booleans() | big_ints | st.floats(allow_nan=False) | texts
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


def _nested(depth: int, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


deep = st.builds(_nested, st.sampled_from([100, 1000, 100_000]), st.sampled_from(["list", "dict"]))
huge_number = st.integers(min_value=21, max_value=6000).map(lambda n: b"1" * n)


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with a few of its values (at any depth) replaced, removed or added."""
    value = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        node = value
        while True:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            child = node[key]
            if isinstance(child, dict | list) and child and draw(st.booleans()):
                node = child
                continue
            action = draw(st.sampled_from(["replace", "remove", "add"]))
            if action == "replace":
                node[key] = draw(json_values)
            elif action == "remove" and isinstance(node, dict):
                del node[key]
            elif isinstance(node, dict):
                node[draw(texts)] = draw(json_values)
            else:
                node.append(draw(json_values))
            break
    return value


def _encodings(obj: Any) -> st.SearchStrategy[bytes]:
    text = json.dumps(obj)
    return st.sampled_from(
        [
            text.encode(),
            text.encode("utf-16"),
            text.encode("utf-32"),
            text.encode("utf-8")[: len(text) // 2],
        ]
    )


def json_bodies(base: Any) -> st.SearchStrategy[bytes]:
    return (
        st.just(json.dumps(base).encode())
        | mutated(base).flatmap(_encodings)
        | json_values.map(lambda v: json.dumps(v).encode())
        | st.binary(max_size=200)
        | deep
        | huge_number
        | st.just(b'{"a": NaN}')
        | st.just(b'"\\ud800"')
    )


def _flip(data: bytes, at: int, byte: int, cut: int) -> bytes:
    at %= len(data)
    return (data[:at] + bytes([byte]) + data[at + 1 :])[: max(cut, 1)]


cbor_bodies = (
    st.builds(
        _flip,
        st.just(SAMPLE_CBOR_BYTES),
        st.integers(0, 10**6),
        st.integers(0, 255),
        st.integers(1, len(SAMPLE_CBOR_BYTES)),
    )
    | mutated(SAMPLE).map(cbor2.dumps)
    | json_values.map(cbor2.dumps)
    | st.binary(max_size=200)
    | st.just(b"\x81" * 100_000 + b"\x00")
    | st.just(b"\x9f" * 10_000)
    | st.just(b"\x5b\xff\xff\xff\xff\xff\xff\xff\xff")
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/cbor",
        "application/json; charset=utf-16",
        "text/plain",
        "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded",
        "",
        "garbage/x; charset=klingon",
    ]
)
accepts = st.sampled_from(["", "*/*", "application/json", "image/png", "text/html", "x/y;q=0"])
auths = st.sampled_from(ROLES) | printable.map(lambda t: f"raw:{t}")
segments = (texts | printable).filter(bool).map(lambda s: quote(s, safe=""))


def _headers(auth: str | None, live: InProcess) -> dict[str, str]:
    if auth is None:
        return {}
    if auth.startswith("raw:"):
        return {"Authorization": auth[4:]}
    if auth == "garbage":
        return {"Authorization": "Bearer not-a-token"}
    return {"Authorization": f"Bearer {live.tokens[auth]}"}


def _every_role(live: InProcess, client: Any, method: str, url: str, **kw: Any) -> None:
    sent = repr(kw.get("params", "")) + repr(kw.get("content", b""))[:100_000]
    given_headers = kw.pop("headers", {})
    for role in ROLES:
        headers = {**given_headers, **_headers(role, live)}
        _check(live, client.request(method, url, headers=headers, **kw), sent)


# --- the routes -----------------------------------------------------------------------------


@FUZZ
@given(
    body=json_bodies(SAMPLE)
    | cbor_bodies
    | st.sampled_from([SAMPLE_JSON.read_bytes(), SAMPLE_CBOR_BYTES]),
    ctype=content_types,
    accept=accepts,
)
def test_decode_bodies(live: InProcess, client: Any, body: bytes, ctype: str, accept: str) -> None:
    headers = {"Content-Type": ctype, "Accept": accept}
    _every_role(live, client, "POST", "/v1/decode", content=body, headers=headers)


@FUZZ
@given(body=json_bodies(RUN_REPORT), ctype=content_types)
def test_run_report_bodies(live: InProcess, client: Any, body: bytes, ctype: str) -> None:
    _every_role(
        live, client, "POST", "/v1/run-reports", content=body, headers={"Content-Type": ctype}
    )


@st.composite
def policies(draw: st.DrawFn) -> bytes:
    lines = POLICY.splitlines()
    kind = draw(st.sampled_from(["line", "char", "json", "bomb", "raw"]))
    if kind == "line":
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(texts))
        return "\n".join(lines).encode()
    if kind == "char":
        text = POLICY
        at = draw(st.integers(0, len(text) - 1))
        return (
            text[:at] + draw(st.sampled_from(list("[]{}:&*!|>-'\"\t#%@`"))) + text[at + 1 :]
        ).encode()
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "bomb":
        return draw(
            st.sampled_from(
                [
                    b"a: &a [1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\n"
                    b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c]\n",
                    b"format: !!python/object/apply:os.system ['true']\n",
                    b"format: wai-model-policy/1\nclasses: " + b"[" * 20_000,
                    b"format: wai-model-policy/1\nclasses: " + b"9" * 5000 + b"\n",
                    b"\xff\xfe" + POLICY.encode("utf-16-le"),
                ]
            )
        )
    return draw(st.binary(max_size=300))


@FUZZ
@given(body=policies(), method=st.sampled_from(["PUT", "POST"]), ctype=content_types)
def test_policy_bodies(live: InProcess, client: Any, body: bytes, method: str, ctype: str) -> None:
    _every_role(live, client, method, "/v1/policy", content=body, headers={"Content-Type": ctype})


def _tar(members: list[tuple[str, bytes]], gz: bool) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz" if gz else "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name or "x")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


names = st.sampled_from(["manifest.json", "../escape", "/abs", "a/../../b", "ok.onnx"]) | printable
archives = (
    st.builds(_tar, st.lists(st.tuples(names, st.binary(max_size=64)), max_size=4), st.booleans())
    | st.binary(max_size=300).map(gzip.compress)
    | st.binary(max_size=300)
)


@FUZZ
@given(
    body=archives,
    ctype=st.sampled_from(["application/gzip", "application/x-tar", "application/zip", ""]),
)
def test_set_archives(live: InProcess, client: Any, body: bytes, ctype: str) -> None:
    _every_role(live, client, "POST", "/v1/sets", content=body, headers={"Content-Type": ctype})


REPORT_QUERY = [
    "cursor",
    "limit",
    "unit",
    "reason",
    "set",
    "outcome",
    "request_id",
    "since_ms",
    "until_ms",
    "sink_class",
    "sink",
    "bucket_s",
    "version",
    "offset",
    "prefix",
    "sort",
    "desc",
    "q",
    "decoded_nothing",
    "disagree",
    "code",
    "run_report",
    "total",
    "after",
]
#: Cursors shaped like the service's (base64 of ``r<seq>``), with any number or text after ``r``.
cursors = (big_ints.map(str) | texts).map(
    lambda t: base64.urlsafe_b64encode(f"r{t}".encode()).decode().rstrip("=")
)
query_values = (
    texts | big_ints.map(str) | cursors | st.sampled_from(["", "-1", "1e99", "NaN", "0x10"])
)
queries = st.dictionaries(st.sampled_from(REPORT_QUERY) | printable, query_values, max_size=5)


@FUZZ
@given(
    route=st.sampled_from(
        [
            "/v1/reports",
            "/v1/reports/summary",
            "/v1/run-reports/summary",
            "/v1/policy",
            "/v1/policy/history",
            "/v1/paths",
            "/v1/sets",
            "/metrics",
            "/readyz",
            "/v1/fleet/sinks",
            "/v1/fleet/sets",
            "/v1/fleet/exact",
            "/v1/request-errors",
        ]
    )
    | segments.map(lambda s: f"/v1/reports/{s}")
    | segments.map(lambda s: f"/v1/run-reports/{s}")
    | segments.map(lambda s: f"/v1/sets/{s}"),
    params=queries,
)
def test_report_queries(live: InProcess, client: Any, route: str, params: dict[str, str]) -> None:
    _every_role(live, client, "GET", route, params=params)


PAGED = [
    "/v1/reports",
    "/v1/request-errors",
    "/v1/run-reports/summary",
    "/v1/fleet/sinks",
    "/v1/fleet/sets",
    "/v1/fleet/exact",
]


@pytest.fixture(scope="module")
def seeded(live: InProcess) -> None:
    """A decode stored: rows in every list, that a cursor's position is compared with."""
    with live.client("sink") as c:
        assert c.post("/v1/decode", json=SAMPLE).status_code == 200


@FUZZ
@given(data=st.data(), route=st.sampled_from(PAGED))
def test_cursors_that_decode(
    live: InProcess, client: Any, seeded: None, data: Any, route: str
) -> None:
    """Issue 36: cursors of the service's shape with parts of any type and size (a string for
    a count, 2**63, a float for a name): ``cursor_invalid``, never a 5xx."""
    _every_role(live, client, "GET", route, params=data.draw(cursor_params(route)))


digests = st.sampled_from(["0" * 64, "f" * 64, "{installed}"]) | segments


@st.composite
def page_urls(draw: st.DrawFn) -> str:
    seg, digest = draw(segments), draw(digests)
    return draw(
        st.sampled_from(
            [
                f"/page/samples/{seg}",
                f"/page/reference/{seg}",
                f"/page/corpus/{seg}",
                f"/page/sets/default/{seg}",
                f"/page/sets/{digest}/manifest.json",
                f"/page/sets/{digest}/files/{seg}",
                f"/page/sets/{digest}/wgsl/constants.bin",
                f"/page/sets/{digest}/wgsl/plan",
                f"/page/{seg}",
                f"/dashboard/{seg}",
            ]
        )
    )


shapes = st.lists(big_ints.map(str) | printable, max_size=6).map(",".join)


@FUZZ
@given(url=page_urls(), shape=shapes, limits=shapes, extra=queries)
def test_page_data_routes(
    live: InProcess,
    client: Any,
    installed: list[str],
    url: str,
    shape: str,
    limits: str,
    extra: dict[str, str],
) -> None:
    params = {**extra, "shape": shape, "limits": limits}
    url = url.replace("{installed}", installed[len(url) % len(installed)])
    _every_role(live, client, "GET", url, params=params)


@FUZZ
@given(
    auth=auths,
    accept=printable,
    route=st.sampled_from(
        [
            ("GET", "/v1/reports"),
            ("GET", "/v1/paths"),
            ("POST", "/v1/decode"),
            ("POST", "/v1/run-reports"),
            ("GET", "/v1/policy"),
            ("GET", "/readyz"),
        ]
    ),
    extra=st.dictionaries(
        st.sampled_from(
            [
                "X-Request-Id",
                "Content-Encoding",
                "Transfer-Encoding-X",
                "Range",
                "If-None-Match",
                "X-Forwarded-For",
                "Origin",
            ]
        ),
        printable,
        max_size=3,
    ),
)
def test_random_headers(
    live: InProcess,
    client: Any,
    auth: str,
    accept: str,
    route: tuple[str, str],
    extra: dict[str, str],
) -> None:
    method, url = route
    headers = {**_headers(auth, live), **extra, "Accept": accept}
    body = SAMPLE_JSON.read_bytes() if method == "POST" else None
    _check(live, client.request(method, url, content=body, headers=headers), repr(headers))
