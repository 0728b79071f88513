"""ictd-interp: softmax transformers that run TD learning in context, made inspectable.

The core, in layers; each sub-package imports only those listed before it:

- ``config``: validated, torch-free dataclasses (model, tasks, training) with ``to_dict``/``from_dict``.
- ``io``: checkpoint files (header and state dict), the shipped models' folder, provenance, progress bars.
- ``tasks``: MRP -> trajectory -> features -> prompt, and sampling task batches from a distribution.
- ``models``: the hooked models (stylised, standard, the predecessor's linear one), θ* and the linear
  constructions, masks, the architecture registry and loading.
- ``reference``: the algorithms and weight metrics the models are compared with (TD variants, cos to θ*).
- ``training``: batches, objectives, the training loop, evaluation, run folders, retraining shipped models.
- ``cli``: the ``ictd-interp`` command: the core's sub-commands, and those the analyses register (an entry point).

Above the core, installed inside this package from their own top-level folders: ``ictd_interp.hooks`` (interventions
on the hooked models; folder ``hooks/``) and ``ictd_interp.analyses`` (metrics, figures, reports, studies, claims,
the methods benchmark and their commands; folder ``analyses/``). The core imports neither.

Names are imported on first use (PEP 562), so ``ictd-interp --help`` does not pay for torch.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "ICTDConfig": "config",
    "StandardConfig": "config",
    "LinearICTDConfig": "config",
    "TaskDistribution": "config",
    "TrainConfig": "config",
    "PRESETS": "config",
    "CheckpointError": "io.checkpoint",
    "save_checkpoint": "io.checkpoint",
    "list_pretrained": "io.pretrained",
    "MRP": "tasks",
    "boyan_chain": "tasks",
    "boyan_chains": "tasks",
    "make_features": "tasks",
    "PromptLayout": "tasks",
    "build_prompt": "tasks",
    "context_inputs": "tasks",
    "sample_trajectories": "tasks",
    "TaskBatch": "tasks",
    "sample_tasks": "tasks",
    "sample_from": "tasks",
    "HookedICTDTransformer": "models",
    "HookedStandardTransformer": "models",
    "HookedLinearICTD": "models",
    "load_checkpoint": "models",
    "theta_star": "models",
    "linear_td": "reference",
    "softmax_td": "reference",
    "tabular_td": "reference",
    "td_errors": "reference",
    "value_signature": "reference",
    "weight_cosines": "reference",
    "weight_distances": "reference",
    "train": "training",
    "resume": "training",
    "EvalSet": "training",
    "load_run_config": "io.run_folder",
    "retrain": "training",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
