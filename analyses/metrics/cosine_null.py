"""What a weight cosine with θ* means: the same cosines of models that do not run TD.

``cos(A, A*)`` and ``cos(V, V*)`` (the lowest layer's, over the trainable identifiable entries: ``weight_cosines``)
can sit near 1 for reasons other than TD: with uniform features the best attention of almost any objective is a
positive multiple of the feature Gram matrix, so ``|cos(A, A*)|`` is near 1 whatever the model learned. A cosine is
evidence only against its null:

* ``random initialisation``: the model's own config at ``N_INIT`` fresh seeds, untrained (mean and the range);
* the shipped models trained on the same task family with **other objectives** or on **shuffled rewards**
  (``NULL_MODELS``: the quick preset with Monte-Carlo returns, true values, or each trajectory's rewards permuted in
  time, so a reward says nothing about its state; the NEU objective at 3 layers), read from their weights.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.io.checkpoint import CONFIG, WEIGHTS
from ictd_interp.io.pretrained import PRETRAINED_DIR, names
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.reference.metrics import weight_cosines

N_INIT = 64
# shipped models that are not TD learners, by what they were trained for (their own configs)
NULL_MODELS = {
    "shuffled rewards": "quick-shuffled-s0",
    "Monte-Carlo objective": "quick-mc-s0",
    "supervised objective": "quick-supervised-s0",
    "NEU objective, 3 layers": "depth3-neu-s0",
}


@dataclass(kw_only=True)  # fields in summary.json's order
class NullRow:
    """One null's lowest-layer cosines: one model's, or the mean and range over ``n`` random initialisations."""

    name: str
    n: int
    cos_A: float
    cos_V: Optional[float]
    cos_A_range: Optional[list[float]] = None
    cos_V_range: Optional[list[float]] = None


def lowest(model: HookedICTDTransformer) -> tuple[float, Optional[float]]:
    """The lowest layer's ``cos(A, A*)`` and ``cos(V, V*)`` (None where V has no identifiable entry)."""
    cos = weight_cosines(model, model.cfg)
    values = [v for v in cos["V"] if v is not None and np.isfinite(v)]
    return float(min(cos["A"])), (float(min(values)) if values else None)


def random_init(cfg: ICTDConfig, n: int = N_INIT) -> NullRow:
    """The cosines of ``n`` untrained models of ``cfg`` (seeds 1000 ..)."""
    pairs = [lowest(HookedICTDTransformer(replace(cfg, seed=1000 + i))) for i in range(n)]
    a = np.array([p[0] for p in pairs])
    v = np.array([p[1] for p in pairs if p[1] is not None])
    return NullRow(
        name="random initialisation",
        n=n,
        cos_A=float(a.mean()),
        cos_A_range=[float(a.min()), float(a.max())],
        cos_V=float(v.mean()) if len(v) else None,
        cos_V_range=[float(v.min()), float(v.max())] if len(v) else None,
    )


def nulls(cfg: ICTDConfig) -> list[NullRow]:
    """Random initialisation of ``cfg`` and every shipped null model."""
    rows = [random_init(cfg)]
    for name, model_name in NULL_MODELS.items():
        if model_name in names() and all((PRETRAINED_DIR / model_name / f).exists() for f in (WEIGHTS, CONFIG)):
            a, v = lowest(HookedICTDTransformer.from_pretrained(model_name))
            rows.append(NullRow(name=f"{name} ({model_name})", n=1, cos_A=a, cos_V=v))
    return rows
