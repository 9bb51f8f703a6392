"""The `exported` stage (`00-exported.txt`): the model file's module, captured by torch.export."""

from __future__ import annotations

from ..capture import Exported, capture
from ..model_file import ModelSpec
from . import StageContext


def run(spec: ModelSpec, context: StageContext) -> Exported:
    return capture(spec)
