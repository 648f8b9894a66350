"""CompressAI checkpoints as ``make-set`` reads them: the forms CompressAI's own loader accepts
(a bare state dict, ``{"state_dict": …}`` as examples/train.py saves it, ``{"network": …}``,
keys prefixed ``module.`` by a model trained on several GPUs), ``--update-quantiles`` for a
checkpoint saved before ``update()``, and every refusal a typed one-line error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _thirdparty import import_or_skip

pytestmark = pytest.mark.tools

import_or_skip(
    lambda: __import__("compressai"),
    "torch",
    "compressai",
    reason="the tools extra (torch, CompressAI)",
)
import torch  # noqa: E402

from wai_dispatch.cli.main import main  # noqa: E402
from wai_dispatch.conformance import weights_dir  # noqa: E402
from wai_dispatch.tools import train_bmshj2018  # noqa: E402
from wai_dispatch.tools import wai_bmshj2018_npu_set as writer  # noqa: E402

DEMO = weights_dir() / "bmshj2018-demo-q3.pt"


@pytest.fixture(scope="module")
def demo_state() -> dict[str, Any]:
    state: dict[str, Any] = torch.load(DEMO, map_location="cpu", weights_only=True)
    return state


@pytest.fixture(scope="module")
def demo_model() -> Any:
    model, _ = writer.load_model(checkpoint=DEMO, pretrained=False, quality=3)
    return model


def _same_model(a: Any, b: Any) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


FORMS = {
    "multi-gpu": lambda s: {f"module.{k}": v for k, v in s.items()},
    "network": lambda s: {"network": s, "epoch": 3},
    "state-dict-multi-gpu": lambda s: {
        "epoch": 9,
        "state_dict": {f"module.{k}": v for k, v in s.items()},
        "optimizer": {"state": {}, "param_groups": []},
    },
    "model-state-dict": lambda s: {"model_state_dict": s},
}


@pytest.mark.parametrize("form", list(FORMS))
def test_checkpoint_forms_compressai_accepts(
    tmp_path: Path, demo_state: dict[str, Any], demo_model: Any, form: str
) -> None:
    path = tmp_path / "ckpt.pth.tar"
    torch.save(FORMS[form](demo_state), path)
    model, origin = writer.load_model(checkpoint=path, pretrained=False, quality=3)
    assert origin["kind"] == "checkpoint"
    assert _same_model(model, demo_model)
    assert _same_model(train_bmshj2018.load_checkpoint(path), demo_model)


def _before_update(state: dict[str, Any]) -> dict[str, Any]:
    """The state a model saves before update(): the table buffers still empty."""
    out = dict(state)
    for name in ("_offset", "_quantized_cdf", "_cdf_length"):
        out[f"entropy_bottleneck.{name}"] = torch.zeros(0, dtype=torch.int32)
    return out


def test_update_quantiles_gives_compressais_tables(
    tmp_path: Path, demo_state: dict[str, Any]
) -> None:
    """A checkpoint saved before update(): --update-quantiles cuts the tables CompressAI's
    update(force=True, update_quantiles=True) cuts (without it: refused, next test)."""
    from wai_dispatch.tools._compressai import checkpoint_state_dict, factorized_prior

    path = tmp_path / "early.pth.tar"
    torch.save({"state_dict": _before_update(demo_state)}, path)
    model, _ = writer.load_model(
        checkpoint=path, pretrained=False, quality=3, update_quantiles=True
    )
    theirs = factorized_prior(128, 192)
    theirs.load_state_dict(checkpoint_state_dict(torch.load(path, weights_only=True)))
    theirs.eval().update(force=True, update_quantiles=True)
    mine, ref = model.entropy_bottleneck, theirs.entropy_bottleneck
    assert torch.equal(mine._quantized_cdf, ref._quantized_cdf)
    assert torch.equal(mine._offset, ref._offset)
    assert not torch.equal(
        demo_state["entropy_bottleneck.quantiles"], model.entropy_bottleneck.quantiles
    ), "update_quantiles re-estimates the quantiles"


def test_a_checkpoint_without_tables_is_refused_unless_update_quantiles(
    tmp_path: Path, demo_state: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Saved before net.update(): the tables its streams were coded with are not in it, so
    make-set refuses it with one line that names the fix (issue 21: it was written silently)."""
    path = tmp_path / "early.pth.tar"
    torch.save({"state_dict": _before_update(demo_state)}, path)
    with pytest.raises(writer.SetWriterError, match="--update-quantiles"):
        writer.load_model(checkpoint=path, pretrained=False, quality=3)
    status = main(
        ["make-set", "bmshj2018", "--out", str(tmp_path / "set"), "--checkpoint", str(path)]
    )
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("wai-dispatch: error: set_writer_refused: checkpoint ")
    assert "--update-quantiles" in err and "net.update()" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "set").exists()


def test_the_set_records_update_quantiles_only_when_used() -> None:
    assert writer.TABLES_UPDATE_FACT[False] == {}
    assert writer.TABLES_UPDATE_FACT[True] == {"update_quantiles": True}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"not a checkpoint", "cannot be read"),
        ("list", "not a state dict"),
        ("wrong-arch", "not a FactorizedPrior"),
    ],
)
def test_bad_checkpoints_are_one_typed_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    demo_state: dict[str, Any],
    content: object,
    words: str,
) -> None:
    path = tmp_path / "bad.pt"
    if content == "list":
        torch.save([1, 2, 3], path)
    elif content == "wrong-arch":
        torch.save({k: v for k, v in demo_state.items() if "g_s" not in k}, path)
    else:
        assert isinstance(content, bytes)
        path.write_bytes(content)
    status = main(
        ["make-set", "bmshj2018", "--out", str(tmp_path / "set"), "--checkpoint", str(path)]
    )
    err = capsys.readouterr().err
    assert status == 2
    lines = [line for line in err.splitlines() if line.startswith("wai-dispatch: error:")]
    assert len(lines) == 1 and lines[0].startswith("wai-dispatch: error: set_writer_refused: ")
    assert words in lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "set").exists()


def test_make_set_argument_errors_are_one_typed_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    try:
        status = main(["make-set", "bmshj2018", "--quality"])
    except SystemExit as exc:
        status = int(exc.code or 0)
    err = capsys.readouterr().err
    assert status == 2
    assert err.splitlines()[0].startswith("wai-dispatch: error: invalid_argument: ")


@pytest.mark.slow
def test_write_set_records_update_quantiles(tmp_path: Path, demo_state: dict[str, Any]) -> None:
    """The set states how its tables were cut when --update-quantiles was used, and its tables
    are the ones CompressAI's update(force=True, update_quantiles=True) gives."""
    import json

    from wai_dispatch.codec.tables import EntropyTables

    path = tmp_path / "early.pth.tar"
    torch.save({"state_dict": _before_update(demo_state)}, path)
    out = writer.write_set(tmp_path / "set", checkpoint=path, update_quantiles=True)
    facts = json.loads((out / "set.json").read_bytes())["facts"]
    assert facts["update_quantiles"] is True
    model, _ = writer.load_model(
        checkpoint=path, pretrained=False, quality=3, update_quantiles=True
    )
    eb = model.entropy_bottleneck
    expected = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb._get_medians().detach().reshape(-1)
    )
    assert EntropyTables.from_json((out / facts["tables"]).read_bytes()) == expected
    assert json.loads((out / "set.json").read_bytes())["facts"]["weights_origin"] == "checkpoint"


# --- one rule for both bmshj2018 writers (tools/bmshj2018_model.py update_tables) ------------

HYPER = weights_dir() / "bmshj2018-hyperprior-demo-q3.pt"
TABLES = ("_offset", "_quantized_cdf", "_cdf_length")
#: Each writer's make-set kind, demo checkpoint, and entropy models that carry tables.
WRITERS = {
    "bmshj2018": (DEMO, ("entropy_bottleneck",)),
    "bmshj2018-hyperprior": (HYPER, ("entropy_bottleneck", "gaussian_conditional")),
}


def _load_as_the_writer_does(kind: str, path: Path, update_quantiles: bool) -> Any:
    if kind == "bmshj2018":
        return writer.load_model(
            checkpoint=path, pretrained=False, quality=3, update_quantiles=update_quantiles
        )[0]
    from wai_dispatch.tools.bmshj2018_model import update_tables
    from wai_dispatch.tools.hyperprior_encode import read_hyper_model

    model, state = read_hyper_model(path, 3)
    update_tables(model, state, f"checkpoint {path}", update_quantiles=update_quantiles)
    return model


def _emptied(state: dict[str, Any], models: tuple[str, ...]) -> dict[str, Any]:
    out = dict(state)
    for model in models:
        for name in TABLES:
            out[f"{model}.{name}"] = torch.zeros(0, dtype=torch.int32)
    return out


@pytest.mark.parametrize("kind", list(WRITERS))
def test_both_writers_keep_the_tables_a_checkpoint_carries(kind: str) -> None:
    demo, models = WRITERS[kind]
    state = torch.load(demo, map_location="cpu", weights_only=True)
    model = _load_as_the_writer_does(kind, demo, update_quantiles=False)
    for name in models:
        key = f"{name}._quantized_cdf"
        assert torch.equal(model.state_dict()[key], state[key])


@pytest.mark.parametrize("empty", ["all", "last"])
@pytest.mark.parametrize("kind", list(WRITERS))
def test_both_writers_refuse_a_checkpoint_saved_before_update(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, empty: str
) -> None:
    """The same checkpoint kinds, the same refusal, through make-set (the hyperprior writer
    used to cut the tables itself); ``last``: only one entropy model's tables empty."""
    demo, models = WRITERS[kind]
    path = tmp_path / "early.pth.tar"
    state = torch.load(demo, map_location="cpu", weights_only=True)
    torch.save({"state_dict": _emptied(state, models if empty == "all" else models[-1:])}, path)
    status = main(["make-set", kind, "--out", str(tmp_path / "set"), "--checkpoint", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("wai-dispatch: error: set_writer_refused: checkpoint ")
    assert "--update-quantiles" in err and "net.update()" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "set").exists()


@pytest.mark.parametrize("kind", list(WRITERS))
def test_both_writers_cut_every_table_with_update_quantiles(tmp_path: Path, kind: str) -> None:
    demo, models = WRITERS[kind]
    path = tmp_path / "early.pth.tar"
    state = torch.load(demo, map_location="cpu", weights_only=True)
    torch.save(_emptied(state, models), path)
    model = _load_as_the_writer_does(kind, path, update_quantiles=True)
    theirs = _load_as_the_writer_does(kind, demo, update_quantiles=False)
    theirs.update(force=True, update_quantiles=True)
    for name in models:
        key = f"{name}._quantized_cdf"
        assert model.state_dict()[key].numel() > 0
        assert torch.equal(model.state_dict()[key], theirs.state_dict()[key])
