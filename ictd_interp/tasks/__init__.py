"""The data a model reads: MRP -> trajectory -> features -> prompt, and task batches drawn from a
``TaskDistribution``. Imports ``ictd_interp.config`` only.

``mrp`` (Markov reward processes, Boyan chains, their communicating classes), ``counter`` (counter-based draws of
Boyan-chain tasks on any device), ``sources`` (loop, random and
Gymnasium MRPs), ``families`` (the registered task families), ``mdp`` (MDPs and behaviour policies for control, with
``action_columns``: the prompt's action-value columns), ``trajectory`` (sampling), ``features``, ``prompt`` (the
prompt layout and its shift), ``_types`` (shared type aliases), ``sampling`` (``TaskBatch``; ``sample_from``, where
every batch is drawn, and its keyword forms ``sample_tasks`` for Boyan chains or given MRPs and ``control_tasks``
for an MDP under a behaviour policy).
"""

from ictd_interp.tasks.features import make_features
from ictd_interp.tasks.mrp import MRP, boyan_chain, boyan_chains
from ictd_interp.tasks.prompt import PromptLayout, build_prompt, context_inputs
from ictd_interp.tasks.sampling import TaskBatch, sample_from, sample_tasks
from ictd_interp.tasks.trajectory import sample_trajectories

__all__ = [
    "MRP",
    "PromptLayout",
    "TaskBatch",
    "boyan_chain",
    "boyan_chains",
    "build_prompt",
    "context_inputs",
    "make_features",
    "sample_from",
    "sample_tasks",
    "sample_trajectories",
]
