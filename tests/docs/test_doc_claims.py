"""Claims of the README and docs/ that a coverage audit (issue 21) and a review (issue 26) found
false, held to the code, so that each fails if it returns. (The int_synth report of
docs/dispatch.md and conformance vector 006 are held to the demo's run in tests/cli/test_demo.py;
docs/errors.md's staleness and its 5xx list in tests/dispatch/test_error_codes.py; `config`'s
values in tests/cli/test_cli_manners.py; the docs' ``python`` blocks are run by the doc runner,
tests/docs/test_doc_runner.py.)"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import wai_dispatch
from wai_dispatch.cli.config import DERIVED
from wai_dispatch.dispatch import REFERENCE_OFFER, Unit
from wai_dispatch.tools import errors_doc
from wai_dispatch.tools.doc_paths import missing_paths
from wai_dispatch.tools.doc_runner import doc_files
from wai_dispatch.tools.error_registry import entries

ROOT = Path(__file__).resolve().parents[2]
DOCS = doc_files(ROOT)


def text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_the_documented_bound_refusal_is_the_message_the_rule_writes() -> None:
    source = text("paths/waiops/bounds.py")
    assert '{what} of channel {ch} reaches {hi_max} > 2^31 - 1 (bound rule)"' in source
    shown = re.findall(r"e\.g\. `([^`]*accumulator[^`]*)`", text("docs/wai-ops.md"))
    assert shown, "docs/wai-ops.md shows no example refusal"
    message = re.compile(
        r"^\w+: accumulator of channel \d+ reaches \d+ > 2\^31 - 1 \(bound rule\)$"
    )
    for example in shown:
        assert message.match(example), example


def test_no_doc_promises_what_exists_as_later() -> None:
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert "(later)" not in line, f"{doc.relative_to(ROOT)}:{n}: {line}"


def test_every_vendored_folder_is_listed_in_both_third_party_lists() -> None:
    vendored = sorted(p for p in (ROOT / "service" / "web").rglob("vendor") if p.is_dir())
    assert len(vendored) >= 2
    vendored += sorted(p for p in (ROOT / "tests").rglob("vendor") if p.is_dir())
    for listing in ("THIRD_PARTY.md", "docs/third-party.md"):
        body = text(listing)
        for folder in vendored:
            assert str(folder.relative_to(ROOT)) + "/" in body, (listing, folder)


def _placements(body: str) -> list[dict[str, object]]:
    """Every JSON object in ``body`` (inline code or a block) whose members are units."""
    found = []
    for candidate in re.findall(r"\{[^{}]*\}", body):
        try:
            obj = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj and set(obj) <= {"npu", "gpu", "cpu", "unknown"}:
            found.append(obj)
    return found


def test_a_placement_in_the_docs_has_all_four_members() -> None:
    """§5: a report's placement always names npu, gpu, cpu and unknown."""
    seen = 0
    for doc in DOCS:
        for placement in _placements(doc.read_text(encoding="utf-8")):
            seen += 1
            assert set(placement) == {"npu", "gpu", "cpu", "unknown"}, (doc.name, placement)
    assert seen >= 3


def test_the_fuzzing_section_names_every_long_fuzz_target() -> None:
    readme = text("README.md")
    section = readme[readme.index("## Fuzzing") :]
    targets = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"^@pytest\.mark\.fuzz$", p.read_text(encoding="utf-8"), re.M)
    )
    assert len(targets) >= 4
    for target in targets:
        assert f"`{target}`" in section, target


def test_the_program_cache_paragraph_names_every_path_that_keeps_programs() -> None:
    service = text("docs/service.md")
    paragraph = service[service.index("## Program cache") :].split("\n\n")[1]
    users = {
        "paths/onnx.py": "ONNX Runtime sessions",
        "paths/waiops/adapter.py": "`wai-ops/1` programs",
        "paths/coreml.py": "Core ML models",
        "paths/wgsl/adapter.py": "WGSL",
    }
    for module, words in users.items():
        assert "Programs" in text(module), module
        assert words in paragraph, words


def test_the_webnn_form_is_webnn_graphs_files_and_says_so() -> None:
    """§6.2 names offsets into ``decoder.f32``; the set holds webnn-graph's files, and
    docs/page.md says so (a deliberate choice)."""
    page = text("docs/page.md")
    assert "decoder.f32" in page and "decoder.weights" in page and "decoder.manifest.json" in page
    bundled = ROOT / "conformance" / "sets" / "bmshj2018-demo-q3"
    names = {p.name for p in bundled.iterdir()}
    assert {"decoder.webnn.json", "decoder.weights", "decoder.manifest.json"} <= names
    assert "decoder.f32" not in names
    webnn = text("service/web/page_files/js/webnn.js")
    assert "manifest.tensors[" in webnn and "decoder.f32" not in webnn


# --- issue 26: the claims the doc runner could not see -------------------------------------


def _table(body: str) -> list[str]:
    return [line.strip() for line in body.splitlines() if line.lstrip().startswith("|")]


def test_the_two_third_party_lists_have_the_same_rows() -> None:
    """Each said it listed the same rows as the other, and did not."""
    root, docs = _table(text("THIRD_PARTY.md")), _table(text("docs/third-party.md"))
    assert len(root) >= 4 and root == docs


def test_every_path_a_doc_names_exists() -> None:
    """docs/wgsl-path.md cited a `shared/` folder the repository does not have (the doc runner
    checks this too; here it runs in the quick suite)."""
    wrong = [
        f"{doc.relative_to(ROOT)}:{line}: {problem}"
        for doc in DOCS
        for line, problem in missing_paths(doc)
    ]
    assert not wrong, "\n".join(wrong)


def test_no_doc_imports_a_folder_as_a_package() -> None:
    """docs/dispatch.md's `from dispatch import …` fails outside a checkout: the import root is
    `wai_dispatch` (`from wai_dispatch.dispatch import …`)."""
    folders = "dispatch|codec|paths|service|cli|tools|conformance"
    bare = re.compile(rf"^\s*(?:from|import)\s+(?:{folders})\b|`(?:from|import) (?:{folders})\b")
    wrong = [
        f"{doc.relative_to(ROOT)}:{n}: {line.strip()}"
        for doc in DOCS
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if bare.search(line)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_migrations_listed_are_every_migration() -> None:
    """docs/operations.md listed 0001–0003 of six."""
    versions = sorted(p.stem for p in (ROOT / "service/store/migrations/versions").glob("0*.py"))
    guide = text("docs/operations.md")
    paragraph = guide[guide.index("## Upgrades and rollback") :].split("\n\n")[1]
    listed = re.findall(r"`(\d{4}_\w+)`", paragraph)
    assert len(versions) >= 6 and listed == versions, (listed, versions)


def test_no_paragraph_puts_a_gpu_path_in_the_reference_offer() -> None:
    """docs/bmshj2018-hyperprior-set.md said the reference offer runs ONNX Runtime on the GPU
    where CUDA exists; `gpu/onnx-runtime/float` is in no default offer."""
    gpu_offered = any(path.unit is Unit.GPU for path in REFERENCE_OFFER)
    wrong = []
    for doc in DOCS:
        for paragraph in doc.read_text(encoding="utf-8").split("\n\n"):
            flat = " ".join(paragraph.split())
            for sentence in re.split(r"(?<=[.;:])\s", flat):
                claims = "reference offer" in sentence and re.search(r"\bGPU\b|gpu/", sentence)
                if claims and not gpu_offered and not re.search(r"\bnot\b|only in an", sentence):
                    wrong.append(f"{doc.name}: {sentence}")
    assert not wrong, "\n".join(wrong)
    hyperprior = " ".join(text("docs/bmshj2018-hyperprior-set.md").split())
    assert "GPU where CUDA exists, else CPU" not in hyperprior


def test_errors_doc_is_the_registry_and_every_code_is_raised() -> None:
    """docs/errors.md missed `set_registry_down` among the 5xx codes, four meanings differed
    from the registry's, and it listed `page_entropy_unsupported`, which nothing raised."""
    doc = text("docs/errors.md")
    assert doc == errors_doc.render()
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `([a-z0-9_]+)` \|(?: [^|]+ \|){4} (.*) \|$", doc, re.M)
    }
    assert rows == {e.code: e.meaning for e in entries()}
    sources = "\n".join(
        p.read_text(encoding="utf-8")
        for folder in ("dispatch", "codec", "paths", "service", "cli", "tools")
        for p in (ROOT / folder).rglob("*.py")
    )
    page = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "service/web").rglob("*.js"))
    # a code is raised where its class is named besides its definition (a raise, a subclass, a
    # handler), or by the page's script; the sources' names counted once, not a scan a class
    named = Counter(re.findall(r"\w+", sources))
    unused = [
        e.code
        for e in entries()
        if named[e.error.__name__] < 2 and f'"{e.code}"' not in page and f"'{e.code}'" not in page
    ]
    assert not unused, f"codes nothing raises: {unused}"


def test_no_doc_speaks_of_a_release_that_is_not_this_one() -> None:
    """docs/errors.md spoke of "before 0.2" while `--version` says 0.1.0."""
    version = tuple(int(p) for p in wai_dispatch.__version__.split("."))
    release = re.compile(
        r"\b(?:before|since|until|after|from|in) (?:release |version |v)?(0\.\d+(?:\.\d+)?)\b"
    )
    wrong = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for found in release.findall(line):
                if tuple(int(p) for p in found.split(".")) > version[: found.count(".") + 1]:
                    wrong.append(f"{doc.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not wrong, f"this is {wai_dispatch.__version__}:\n" + "\n".join(wrong)


def test_config_paragraph_names_every_derived_value() -> None:
    """docs/cli.md said `config` prints effective values while it printed `decode_threads 0`
    and `database_url None`: each value it now works out is named there."""
    cli = " ".join(text("docs/cli.md").split())
    paragraph = cli[cli.index("`wai-dispatch config` prints") :].split("`wai-dispatch doctor`")[0]
    for name in DERIVED:
        assert f"`{name}`" in paragraph, name
