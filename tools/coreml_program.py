"""The model-runtime program of a synthesis (spec §6.1): a Core ML ML Program in float16 with
its input fixed, as ``decoder.mlmodel`` and ``decoder.weight.bin``. Conversion runs on Linux;
compiling and predicting need macOS.

Determinism: the environment's versions in the metadata are replaced (:data:`FIXED_METADATA`),
maps are re-serialized in protobuf's deterministic order (coremltools writes hash order), and
:func:`program_files` converts twice and refuses bytes that differ.
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

# coremltools writes its own version, the source framework's version and dialect into
# metadata.userDefined; the set records the program, not the tool versions that made it.
FIXED_METADATA = {
    "com.github.apple.coremltools.source": "torch",
    "com.github.apple.coremltools.source_dialect": "TorchScript",
    "com.github.apple.coremltools.version": "coremltools",
}


class CoreMLProgramError(RuntimeError):
    """The program could not be converted, or its bytes are not stable."""


def _quiet_coremltools() -> Any:
    warnings.filterwarnings("ignore", module="coremltools")
    logging.getLogger("coremltools").setLevel(logging.ERROR)

    return import_module("coremltools")  # publishes no types: its conversion API is Any here


def _trace(module: Any, latent_shape: Sequence[int]) -> Any:
    import torch

    # torch.jit.trace is unannotated; the traced module goes on to coremltools (Any there too)
    trace: Callable[..., Any] = torch.jit.trace
    example = torch.zeros(tuple(latent_shape), dtype=torch.float32)
    with torch.no_grad():
        return trace(module.eval(), example, check_trace=False)


def _convert_once(
    traced: Any, latent_shape: Sequence[int], input_name: str, output_name: str
) -> tuple[bytes, bytes]:
    ct = _quiet_coremltools()
    model = ct.convert(
        traced,
        # float32 in (the latent as the entropy stage gives it), float16 out: 21 operations,
        # one cast among them, as the spec's evidence (§8) counts them.
        inputs=[ct.TensorType(name=input_name, shape=tuple(latent_shape), dtype=np.float32)],
        outputs=[ct.TensorType(name=output_name)],
        convert_to="mlprogram",
        compute_precision=ct.precision.FLOAT16,
        minimum_deployment_target=ct.target.macOS13,
        skip_model_load=True,
    )
    spec = model.get_spec()
    user = spec.description.metadata.userDefined
    for key in list(user.keys()):
        if key.startswith("com.github.apple.coremltools."):
            del user[key]
    for key, value in FIXED_METADATA.items():
        user[key] = value
    with tempfile.TemporaryDirectory(prefix="wai-coreml-") as tmp:
        package = Path(tmp) / "decoder.mlpackage"
        out = ct.models.MLModel(spec, weights_dir=model.weights_dir, skip_model_load=True)
        out.save(os.fspath(package))
        data = package / "Data" / "com.apple.CoreML"
        mlmodel = (data / "model.mlmodel").read_bytes()
        weights = (data / "weights" / "weight.bin").read_bytes()
    # coremltools serializes the specification's protobuf maps (the ML Program's functions,
    # block specializations, operation attributes, metadata) in hash order, which changes from
    # one process to the next (PYTHONHASHSEED); re-serialized deterministically (map entries by
    # key), the same program always gives the same bytes.
    parsed = ct.proto.Model_pb2.Model()
    parsed.ParseFromString(mlmodel)
    return parsed.SerializeToString(deterministic=True), weights


def operation_count(mlmodel: bytes) -> int:
    """The program's operations, constants left out (§5's placement counts), over every block
    of the ``main`` function."""
    ct = _quiet_coremltools()
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(mlmodel)
    if spec.WhichOneof("Type") != "mlProgram":
        raise CoreMLProgramError("decoder.mlmodel is not an ML Program")
    main = spec.mlProgram.functions["main"]
    block = main.block_specializations[main.opset]

    def count(b: Any) -> int:
        n = 0
        for op in b.operations:
            if op.type != "const":
                n += 1
            for inner in op.blocks:
                n += count(inner)
        return n

    return count(block)


def program_files(
    module: Any,
    latent_shape: Sequence[int],
    *,
    input_name: str = "latent",
    output_name: str = "x_hat",
) -> tuple[bytes, bytes, int]:
    """Convert ``module`` (a torch synthesis) twice; ``(decoder.mlmodel, decoder.weight.bin,
    operation count)``, refusing bytes that differ between the two conversions."""
    traced = _trace(module, latent_shape)
    first = _convert_once(traced, latent_shape, input_name, output_name)
    second = _convert_once(traced, latent_shape, input_name, output_name)
    for name, a, b in zip(("decoder.mlmodel", "decoder.weight.bin"), first, second, strict=True):
        if a != b:
            raise CoreMLProgramError(f"{name}: two conversions of the same program differ")
    return first[0], first[1], operation_count(first[0])
