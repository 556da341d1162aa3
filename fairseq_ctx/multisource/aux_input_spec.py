"""The auxiliary inputs a multi-source model was built for, stored in its args (and checkpoint)
as ``--aux-input-spec`` (filled in by the ``multimodal_translation`` task)."""
from dataclasses import dataclass
from typing import List


@dataclass
class AuxInput:
    name: str
    kind: str  # "feature" (dense, projected) or "text" (extra source sentence)
    dim: int = 0
    regions: int = 0


def format_spec(inputs: List[AuxInput]) -> str:
    return ",".join(f"{i.name}:feature:{i.dim}:{i.regions}" if i.kind == "feature" else f"{i.name}:text" for i in inputs)


def parse_spec(spec: str) -> List[AuxInput]:
    inputs = []
    for item in (spec or "").split(","):
        if not item:
            continue
        parts = item.split(":")
        if parts[1] == "feature":
            inputs.append(AuxInput(parts[0], "feature", int(parts[2]), int(parts[3])))
        else:
            inputs.append(AuxInput(parts[0], "text"))
    return inputs
