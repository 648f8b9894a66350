"""The set's program for the platform's model runtime (Core ML, ``npu/model-runtime/float``,
§6.1): where a set keeps it (:class:`ProgramFiles`), its one input as the specification states it
(read through coremltools' protobuf, typed here by Protocols: coremltools publishes no types),
the package the sink places the set's bytes in, and how a compute plan becomes a placement
(§5). Imports coremltools only to read a specification."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from wai_dispatch.dispatch import Placement
from wai_dispatch.paths.job import SetFiles
from wai_dispatch.setfacts.facts import SetFacts

#: §6.1: the two files a set holds a program for the runtime in, when its facts name none.
SPEC_FILE = "decoder.mlmodel"
WEIGHTS_FILE = "decoder.weight.bin"
#: The facts key under ``programs`` that describes the runtime's program.
FACTS_KEY = "model-runtime"


# What the compute plan's preferred device is called (coremltools' class names, or a unit
# token), and the unit it counts for (§5).
_DEVICE_UNITS = {
    "MLNeuralEngineComputeDevice": "npu",
    "MLGPUComputeDevice": "gpu",
    "MLCPUComputeDevice": "cpu",
    "npu": "npu",
    "gpu": "gpu",
    "cpu": "cpu",
}


def placement_from_plan(operations: Iterable[tuple[str, str | None]]) -> Placement:
    """Count a compute plan's operations per unit (§5): ``(operator name, preferred device)``
    pairs, the device as coremltools names its class (or a unit token), ``None`` where the plan
    names none. ``const`` operations are constants and left out (§5)."""
    counts = {"npu": 0, "gpu": 0, "cpu": 0, "unknown": 0}
    for operator, device in operations:
        if operator == "const":
            continue
        counts[_DEVICE_UNITS.get(device or "", "unknown")] += 1
    return Placement(**counts)


# --- the set's program -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProgramFiles:
    """Where a set keeps its program for the runtime, from its facts (§6.1)."""

    spec: str = SPEC_FILE
    weights: str = WEIGHTS_FILE
    input: str = "latent"
    output: str = "x_hat"
    latent_shape: tuple[int, ...] | None = None

    @classmethod
    def from_facts(cls, facts: SetFacts) -> ProgramFiles:
        entry = facts.program(FACTS_KEY)
        if entry is None:
            return cls()
        return cls(
            spec=entry.file or SPEC_FILE,
            weights=entry.weights or WEIGHTS_FILE,
            input=entry.input or "latent",
            output=entry.output or "x_hat",
            latent_shape=entry.shape(),
        )


@dataclass(frozen=True, slots=True)
class ProgramInput:
    """The program's one input as its specification states it (§6.1: it fixes the latent)."""

    name: str
    shape: tuple[int, ...]
    float16: bool


# --- coremltools, typed ------------------------------------------------------------------------
# coremltools publishes no types (no stubs, no py.typed): the parts of it used here are named by
# these Protocols, and each of its modules is imported by name and read through its Protocol.


class _ArrayFeatureType(Protocol):  # Model_pb2.ArrayFeatureType (a protobuf message)
    FLOAT16: int  # the ``dataType`` enum's half-precision value
    shape: Sequence[int]
    dataType: int


class _FeatureType(Protocol):
    multiArrayType: _ArrayFeatureType

    def HasField(self, name: str) -> bool: ...


class _FeatureDescription(Protocol):
    name: str
    type: _FeatureType


class _ModelDescription(Protocol):
    input: Sequence[_FeatureDescription]


class _ModelSpec(Protocol):  # Model_pb2.Model
    description: _ModelDescription

    def ParseFromString(self, data: bytes) -> object: ...


class _ModelPb2(Protocol):  # coremltools.proto.Model_pb2
    ArrayFeatureType: _ArrayFeatureType

    def Model(self) -> _ModelSpec: ...


def _from(module: str, name: str) -> object:
    """``from module import name``, for a module that publishes no types."""
    return getattr(__import__(module, fromlist=[name]), name)


def read_program_input(spec_bytes: bytes, name: str | None = None) -> ProgramInput:
    """Parse the specification protobuf (coremltools' ``Model_pb2``) for its input ``name``,
    or its only input. Raises :class:`ValueError` for bytes that are not such a program."""
    Model_pb2 = cast(_ModelPb2, _from("coremltools.proto", "Model_pb2"))  # heavy: coremltools

    spec = Model_pb2.Model()
    try:
        spec.ParseFromString(spec_bytes)
    except Exception as exc:  # protobuf's DecodeError, whatever its module
        raise ValueError(f"the program's specification does not parse: {exc}") from exc
    inputs = list(spec.description.input)
    chosen = [i for i in inputs if i.name == name] if name else inputs
    if len(chosen) != 1:
        names = [i.name for i in inputs]
        raise ValueError(f"the program has inputs {names}, not one input {name or ''}".strip())
    feature = chosen[0]
    array = feature.type.multiArrayType
    if not feature.type.HasField("multiArrayType") or not array.shape:
        raise ValueError(f"the program's input {feature.name!r} has no fixed array shape")
    return ProgramInput(
        feature.name,
        tuple(int(d) for d in array.shape),
        array.dataType == Model_pb2.ArrayFeatureType.FLOAT16,
    )


def program_shape(set_files: SetFiles) -> tuple[int, ...] | None:
    """The latent shape the set's program takes: from its specification, else from the set's
    facts (``latent_shape``) where coremltools cannot be imported; ``None`` if neither says."""
    files = ProgramFiles.from_facts(set_files.facts)
    if not set_files.has(files.spec):
        return files.latent_shape
    try:
        return read_program_input(set_files.read(files.spec), files.input).shape
    except ImportError:
        return files.latent_shape


# --- the package the sink places the set's bytes in (§6.1) ----------------------------------


def write_package(directory: str | Path, spec_bytes: bytes, weight_bytes: bytes) -> Path:
    """Write ``<directory>/decoder.mlpackage`` holding exactly these bytes, laid out as
    coremltools saves a package (the specification, and the weight file where the program's
    ``@model_path/weights/weight.bin`` references resolve), and return its path."""
    package = Path(directory) / "decoder.mlpackage"
    data = package / "Data" / "com.apple.CoreML"
    (data / "weights").mkdir(parents=True)
    (data / "model.mlmodel").write_bytes(spec_bytes)
    (data / "weights" / "weight.bin").write_bytes(weight_bytes)
    spec_id, weights_id = str(uuid.uuid4()).upper(), str(uuid.uuid4()).upper()
    manifest = {
        "fileFormatVersion": "1.0.0",
        "itemInfoEntries": {
            spec_id: {
                "author": "com.apple.CoreML",
                "description": "CoreML Model Specification",
                "name": "model.mlmodel",
                "path": "com.apple.CoreML/model.mlmodel",
            },
            weights_id: {
                "author": "com.apple.CoreML",
                "description": "CoreML Model Weights",
                "name": "weights",
                "path": "com.apple.CoreML/weights",
            },
        },
        "rootModelIdentifier": spec_id,
    }
    (package / "Manifest.json").write_text(json.dumps(manifest, indent=4) + "\n")
    return package
