"""What models are compared with: the TD algorithms themselves (``td``: softmax-weighted, linear and
tabular TD, their kernels and TD errors), the predecessor's preconditioned batch TD family as plain loops
(``preconditioned``: TD(0), TD(lambda), residual gradient, average-reward TD), control (``control_iterations``: expected
SARSA and softmax Q-learning over action columns; linear batch SARSA and actor-critic) and weight-space metrics
against θ* (``metrics``: cosines, the value signature, kernel diagonality, Assumption 5.1's margin). Imports
``config``, ``tasks``, ``models``."""

from ictd_interp.reference.metrics import value_signature, weight_cosines, weight_distances
from ictd_interp.reference.td import linear_td, same_state_kernel, softmax_td, tabular_td, td_errors

__all__ = [
    "linear_td",
    "same_state_kernel",
    "softmax_td",
    "tabular_td",
    "td_errors",
    "value_signature",
    "weight_cosines",
    "weight_distances",
]
