"""Everything one trial needs, as one validated config: the model, the data set, the training recipe, the
probes, the seed and the machine (device, threads). ``workers/config.py`` defines the model, recipe and probe
parts; each data set defines its own (``workers/data/``, picked by ``data.name``)."""

from __future__ import annotations

from pydantic import Field

from workers.config import ModelSpec, ProbeSpec, StrictModel, TrainSpec
from workers.data.digits import DigitsData
from workers.data.registry import DataSpec


class TrialConfig(StrictModel):
    """Everything one trial needs. ``seed`` seeds weights, data order and augmentation."""

    model: ModelSpec
    data: DataSpec = DigitsData()
    train: TrainSpec = TrainSpec()
    probes: ProbeSpec = ProbeSpec()
    seed: int = 0
    device: str = Field(default="auto", description="auto (cuda if available), cpu, cuda, cuda:N")
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads; None leaves torch's choice")
