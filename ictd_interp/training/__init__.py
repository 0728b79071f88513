"""Pretraining: windowed batches (``batches``), what a batch is, written once (``batch_recipe``), the run's stream
of them (``streams``: from its host generator, ``batch_stream``, or from counters on the device, ``device_stream``),
the objectives (``objectives``), the resumable loop (``trainer``), runs of
one shape stepped together in one process (``stacked``), evaluation during training
(``evaluation``), the opt-in CPU allocator setting (``allocator``) and
retraining a shipped model (``retraining``). Imports every layer below it (``config``, ``io``,
``tasks``, ``models``, ``reference``)."""

from ictd_interp.training.evaluation import EvalSet, evaluate
from ictd_interp.training.retraining import retrain
from ictd_interp.training.trainer import Run, resume, train

__all__ = ["EvalSet", "Run", "evaluate", "resume", "retrain", "train"]
