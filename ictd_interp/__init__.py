"""ictd-interp: softmax transformers that run TD learning in context, made inspectable."""

from ictd_interp.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ictd_interp.config import ICTDConfig
from ictd_interp.features import make_features
from ictd_interp.model import HookedICTDTransformer
from ictd_interp.mrp import MRP, boyan_chain, boyan_chains
from ictd_interp.prompt import PromptLayout, build_prompt, context_inputs
from ictd_interp.tasks import TaskBatch, sample_tasks
from ictd_interp.td import linear_td, softmax_td, tabular_td, td_errors
from ictd_interp.theta_star import theta_star
from ictd_interp.trajectory import sample_trajectories

__all__ = [
    "MRP", "ICTDConfig", "HookedICTDTransformer", "PromptLayout", "TaskBatch", "CheckpointError",
    "load_checkpoint", "save_checkpoint", "sample_tasks",
    "boyan_chain", "boyan_chains", "build_prompt", "context_inputs", "linear_td", "make_features",
    "sample_trajectories", "softmax_td", "tabular_td", "td_errors", "theta_star",
]
