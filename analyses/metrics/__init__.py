"""Metrics on models, caches and tasks: functions returning numbers, tensors or tables, no figures; they write no
files and read only a run's saved checkpoints, where a metric is of the run over training (``dynamics``,
``stability``). They import the core's ``config``, ``io`` (a run's checkpoints), ``tasks``, ``models``,
``reference`` and ``training`` and ``hooks``, never ``figures``, ``reports`` or ``studies``.

``convergence`` (error vs depth and context, geometric fits), ``diagonality`` (kernel diagonality, the margin C),
``probes`` (θ* gaps and cosines), ``site_probes`` (linear probes per layer: where the value and what TD needs are
kept), ``heads`` (per-head kernels and signatures), ``algorithm_id`` (the learned layer read as softmax TD, its
iteration map and spectrum), ``baselines`` (in-context predictors a model must beat), ``in_context`` (the
function-space verdict), ``ladder`` (the verdict ladder across context and depth), ``bayes`` (its top rung: the
posterior mean of v under the Boyan prior), ``stability`` (the verdict over the last checkpoints of a run),
``cosine_null`` (weight cosines of models that run no TD), ``neu`` and ``neu_intervals`` (population NEU, its
intervals and its test), ``intervals`` (Student-t, Welch and Wilson intervals), ``dynamics`` (curves over training),
``linear_family`` (a linear model's place in the predecessor's family), ``predecessor_metrics`` (the predecessor's own
readings), ``depth_limit`` (values as depth grows), ``extrapolation`` (layers run beyond their trained depth),
``theta_star_limit`` (θ*'s map and its limit), ``acting`` (a control model acting on its in-context q), ``readings``
(a checkpoint's readings as classifiers of "runs TD", each with its rule), ``td_profile`` (a layer's value
activations against softmax TD run with its own kernel), ``interchange`` (interchange
interventions at a residual site and DAS through pyvene), ``draws`` (every task set an analysis
draws, named, with its seed). Names are imported on first use.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "Interval": "intervals",
    "identified_model": "linear_family",
    "td0_model": "linear_family",
    "iteration_radius": "linear_family",
    "member_weights": "linear_family",
    "t_interval": "intervals",
    "Paired": "intervals",
    "paired": "intervals",
    "describe_nonfinite": "intervals",
    "proportion_interval": "intervals",
    "context_lengths": "convergence",
    "sup_error": "convergence",
    "errors_by_depth": "convergence",
    "errors_by_context": "convergence",
    "fit_geometric": "convergence",
    "feature_scale_sweep": "convergence",
    "self_attention_mass": "diagonality",
    "kernel_diagonality_mean": "diagonality",
    "model_margin": "diagonality",
    "onehot_margin": "diagonality",
    "state_kernels": "diagonality",
    "circuit_cosines": "probes",
    "prediction_gap": "probes",
    "query_sensitivity": "probes",
    "sensitivity_cosine": "probes",
    "activation_cosines": "probes",
    "LinearProbes": "site_probes",
    "residual_stack": "site_probes",
    "fit_probes": "site_probes",
    "value_targets": "site_probes",
    "value_probes": "site_probes",
    "probed_values": "site_probes",
    "probe_errors_by_depth": "site_probes",
    "td_quantities": "site_probes",
    "quantity_probes": "site_probes",
    "quantity_r2": "site_probes",
    "td_kernel": "heads",
    "tabular_kernel": "heads",
    "most_like": "heads",
    "correlation": "heads",
    "head_kernels": "heads",
    "head_signatures": "heads",
    "layer_signature": "heads",
    "probed_layer_signatures": "heads",
    "probed_signatures": "heads",
    "identify_layer": "algorithm_id",
    "identify_layer_tabular": "algorithm_id",
    "condition_number": "algorithm_id",
    "identify_layers": "algorithm_id",
    "identify_from_values": "algorithm_id",
    "read_layer": "algorithm_id",
    "iteration_map": "algorithm_id",
    "state_map": "algorithm_id",
    "spectral_verdict": "algorithm_id",
    "spectral_depth": "extrapolation",
    "depths_up_to": "extrapolation",
    "layer_at_depth": "extrapolation",
    "depth_extrapolation": "extrapolation",
    "msve_at_depths": "extrapolation",
    "msve_at_depth": "extrapolation",
    "extrapolation_verdict": "extrapolation",
    "constant": "baselines",
    "tabular_mc": "baselines",
    "first_visit_mc": "baselines",
    "td_fixed_point": "baselines",
    "lstd": "baselines",
    "softmax_td_values": "baselines",
    "best_softmax_td": "baselines",
    "estimates": "baselines",
    "error_parts": "baselines",
    "compare": "baselines",
    "sentence": "baselines",
    "population_neu": "neu",
    "zero_predictor_neu": "neu",
    "neu_grid": "neu",
    "neu_sentence": "neu",
    "population_table": "neu",
    "logged_curves": "dynamics",
    "checkpoint_probes": "dynamics",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
