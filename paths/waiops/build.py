"""Writing ``wai-ops/1`` programs: a small builder that collects operations and their integer
weights and serialises the program JSON and the SafeTensors file deterministically (the same
program always gives the same bytes). The set writer and the tests build programs with it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wai_dispatch.paths.waiops.program import FORMAT


@dataclass
class ProgramBuilder:
    input_name: str
    channels: int
    input_range: tuple[int, int]
    operations: list[dict[str, Any]] = field(default_factory=list)
    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    def add(
        self,
        op: str,
        name: str,
        inputs: list[str],
        output: str,
        attrs: dict[str, Any] | None = None,
        params: dict[str, np.ndarray] | None = None,
    ) -> str:
        """Append an operation; each parameter is stored as tensor ``<name>.<param>``."""
        entry: dict[str, Any] = {"op": op, "name": name, "inputs": inputs, "output": output}
        if attrs:
            entry["attrs"] = attrs
        if params:
            entry["params"] = {}
            for key, arr in params.items():
                tname = f"{name}.{key}"
                self.tensors[tname] = np.ascontiguousarray(arr)
                entry["params"][key] = tname
        self.operations.append(entry)
        return output

    def program_json(self, output: str, output_channels: int) -> bytes:
        doc = {
            "format": FORMAT,
            "input": {
                "name": self.input_name,
                "channels": self.channels,
                "range": list(self.input_range),
            },
            "output": {"name": output, "channels": output_channels},
            "operations": self.operations,
        }
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()

    def weights(self) -> bytes:
        from safetensors.numpy import save

        return bytes(save(dict(sorted(self.tensors.items())), metadata={"format": FORMAT}))
