"""Reading models trained with the predecessor's public code (InContextTD, MIT licence; docs/theory.md §13).

Two files it writes are read here, and nothing else:

* its training log ``data.npz``, whose ``P`` and ``Q`` entries hold the matrices at every logged step:
  ``[logged, 1, 2d+1, 2d+1]`` in its "auto" (tied) mode, ``[logged, L, 2d+1, 2d+1]`` in "sequential" mode,
  and ``xs`` the step (the number of tasks trained on) of each entry; beside it ``params.json`` (``d``,
  ``n``, ``l``, ``gamma``, ``activation``, ``mode``, ...) when the run wrote one;
* a ``torch.save``d state dict of its ``Transformer``: ``attn.P``/``attn.Q`` ("auto") or
  ``layers.{i}.P``/``layers.{i}.Q`` ("sequential").

What the files do not say (the depth of an "auto" model, the discount, the activation) comes from
``params.json`` or from the caller, and a contradiction between them is an error naming the file. The
result is the weights in this project's names (``blocks.{l}.attn.P``, ``.Q``) with their
``LinearICTDConfig``; ``ictd-interp import-incontexttd`` writes them as checkpoints.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ictd_interp.config.linear import LinearICTDConfig

LOG, PARAMS = "data.npz", "params.json"
# what their trainer logs beside P and Q at every logged step (its ``_init_log``), under our names
LOGGED_STEP = "alpha"  # their fitted TD step, under our name
THEIR_LOGGED = {"alpha": LOGGED_STEP, "implicit_weight_sim": "IWS", "sensitivity cos sim": "SS", "v_tf v_td msve": "VD"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # terminal colour codes in torch's messages
ACTIVATION_NAMES = {"identity": "identity", "relu": "relu"}  # theirs -> ours; the others are not column-wise


class InContextTDError(ValueError):
    """A file that is not what InContextTD writes, or settings that contradict it; the message names the file."""


@dataclass
class ImportedRun:
    """Weights at each logged step (``steps[i]`` -> ``weights[i]``, our parameter names) and their config."""

    config: LinearICTDConfig
    steps: list[int]
    weights: list[dict[str, torch.Tensor]]
    source: dict[str, Any]  # the files read and the predecessor's own settings
    task: dict[str, Any]  # the run's task distribution as flat settings (n_states, context_len, family, gamma)
    logged: list[dict[str, float]]  # per step, what their trainer logged beside P and Q (THEIR_LOGGED; {} if none)


def read_incontexttd(
    path: Path | str, n_layers: Optional[int] = None, gamma: Optional[float] = None, activation: Optional[str] = None
) -> ImportedRun:
    """Read a run folder (``data.npz`` + ``params.json``), a ``data.npz`` or a saved state dict."""
    path = Path(path)
    if not path.exists():
        raise InContextTDError(f"{path}: no such file or folder")
    log = path / LOG if path.is_dir() else path
    if not log.is_file():
        raise InContextTDError(
            f"{path}: a folder without {LOG}; give InContextTD's log folder, its {LOG} "
            f"or a torch.save'd state dict of its Transformer"
        )
    params_file = log.parent / PARAMS
    params = _read_params(params_file) if params_file.is_file() else {}
    stack, steps, logged = _read_log(log) if log.suffix == ".npz" else (*_read_state_dict(log, params, n_layers), None)
    bad = [i for i, (P, Q) in enumerate(stack) if not (torch.isfinite(P).all() and torch.isfinite(Q).all())]
    if bad:
        raise InContextTDError(
            f"{log}: {len(bad)} of {len(stack)} stored weight sets hold NaN or inf (first at "
            f"logged step {steps[bad[0]]}); a diverged run cannot be imported"
        )
    settings = _settings(log, params, stack, n_layers, gamma, activation)
    d = (stack[0][0].shape[-1] - 1) // 2
    if "d" in params and params["d"] != d:
        raise InContextTDError(
            f"{params_file}: d={params['d']!r} contradicts the stored matrices ({2 * d + 1} x {2 * d + 1}: d = {d})"
        )
    config = LinearICTDConfig(
        d_features=d,
        n_layers=settings["n_layers"],
        gamma=settings["gamma"],
        tied=settings["tied"],
        activation=settings["activation"],
        dtype="float32",
    )
    weights = [_our_names(P, Q, config) for P, Q in stack]
    source = {"file": str(log), "params": params, "mode": "auto" if config.tied else "sequential"}
    return ImportedRun(
        config, steps, weights, source, _task_settings(params_file, params, config), logged or [{} for _ in steps]
    )


MRP_CLASSES = {"boyan": "boyan", "boyanchain": "boyan", "loop": "loop"}  # theirs (lower case) -> our family


def _task_settings(path: Path, params: dict[str, Any], config: LinearICTDConfig) -> dict[str, Any]:
    """The run's own tasks (``s`` states, ``n`` context, its MRP class) for everything analysed on it; a
    setting this project cannot draw is refused by name rather than replaced by a default."""
    task: dict[str, Any] = {"gamma": config.gamma, "d_features": config.d_features}
    if "s" in params:
        task["n_states"] = int(params["s"])
    if "n" in params:
        task["context_len"] = int(params["n"])
    mrp = params.get("mrp_class")
    if mrp is not None:
        family = MRP_CLASSES.get(str(mrp).lower().replace("_", ""))
        if family is None:
            raise InContextTDError(
                f"{path}: mrp_class {mrp!r} has no counterpart here (known: boyan, loop); its "
                "tasks cannot be carried, so the run would be analysed on tasks it never saw"
            )
        task["family"] = family
    if params.get("sample_weight"):
        raise InContextTDError(
            f"{path}: sample_weight = true (rewards made representable by a random weight "
            "vector) cannot be carried: this project's task distributions draw rewards "
            "U(-1, 1); the run would be analysed on tasks it never saw"
        )
    return task


def _read_params(path: Path) -> dict[str, Any]:
    try:
        params = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InContextTDError(f"{path}: not readable JSON ({err})") from None
    if not isinstance(params, dict):
        raise InContextTDError(f"{path}: expected a JSON object of the run's settings")
    return params


def _read_log(path: Path) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], list[int], list[dict[str, float]]]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise InContextTDError(
            f"{path}: not a readable .npz archive (truncated or not written by numpy: {type(err).__name__}: {err})"
        ) from None
    missing = [k for k in ("P", "Q") if k not in arrays]
    if missing:
        raise InContextTDError(
            f"{path}: no {' or '.join(missing)} entry; InContextTD's log holds P and Q "
            f"at every logged step (it has {sorted(arrays)})"
        )
    P, Q = arrays["P"], arrays["Q"]
    if P.ndim != 4 or P.shape != Q.shape or P.shape[-1] != P.shape[-2] or P.shape[-1] % 2 != 1:
        raise InContextTDError(
            f"{path}: P and Q must both be [logged, layers, 2d+1, 2d+1], got P {P.shape}, Q {Q.shape}"
        )
    steps = [int(s) for s in arrays["xs"]] if "xs" in arrays else list(range(1, P.shape[0] + 1))
    if len(steps) != P.shape[0]:
        raise InContextTDError(f"{path}: {len(steps)} steps in xs for {P.shape[0]} logged matrices")
    stack = [(torch.from_numpy(np.array(P[i])), torch.from_numpy(np.array(Q[i]))) for i in range(P.shape[0])]
    series = {
        ours: np.asarray(arrays[theirs], dtype=float).ravel()
        for theirs, ours in THEIR_LOGGED.items()
        if theirs in arrays and np.asarray(arrays[theirs]).size == len(steps)
    }
    return stack, steps, [{name: float(values[i]) for name, values in series.items()} for i in range(len(steps))]


def _read_state_dict(
    path: Path, params: dict[str, Any], n_layers: Optional[int]
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], list[int]]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 (torch raises many kinds; all mean the same here)
        first = ANSI.sub("", str(err).splitlines()[0] if str(err) else type(err).__name__)
        if "Unsupported global" in str(err):  # a whole pickled module, refused by weights_only
            raise InContextTDError(
                f"{path}: a pickled Python object, not a state dict; save the model with "
                "torch.save(model.state_dict(), PATH)"
            ) from None
        raise InContextTDError(f"{path}: not a torch.save'd state dict ({first})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise InContextTDError(f"{path}: expected a state dict (names -> tensors) of InContextTD's Transformer")
    if set(state) == {"attn.P", "attn.Q"}:
        return [(state["attn.P"][None], state["attn.Q"][None])], [0]
    layers = sorted({int(m.group(1)) for k in state if (m := re.fullmatch(r"layers\.(\d+)\.[PQ]", k))})
    expected = {f"layers.{i}.{w}" for i in range(len(layers)) for w in "PQ"}
    if not layers or set(state) != expected:
        raise InContextTDError(
            f"{path}: keys {sorted(state)} are neither attn.P/attn.Q ('auto' mode) nor "
            f"layers.{{i}}.P/Q ('sequential' mode) of InContextTD's Transformer"
        )
    P = torch.stack([state[f"layers.{i}.P"] for i in layers])
    Q = torch.stack([state[f"layers.{i}.Q"] for i in layers])
    return [(P, Q)], [0]


def _settings(path: Path, params: dict[str, Any], stack, n_layers, gamma, activation) -> dict[str, Any]:
    layers_stored = stack[0][0].shape[0]
    tied = layers_stored == 1 and params.get("mode", "auto") == "auto"
    if params.get("mode") == "sequential" and layers_stored != params.get("l", layers_stored):
        raise InContextTDError(f"{path}: params.json says l={params['l']} but {layers_stored} layers are stored")
    given = {"n_layers": n_layers, "gamma": gamma, "activation": activation}
    recorded = {"n_layers": params.get("l"), "gamma": params.get("gamma"), "activation": params.get("activation")}
    _check_recorded(path.parent / PARAMS, recorded)
    if not tied:
        recorded["n_layers"] = layers_stored
    out = {}
    for key in given:
        if given[key] is not None and recorded[key] is not None and given[key] != recorded[key]:
            raise InContextTDError(f"{path}: {key}={given[key]!r} contradicts the run's {recorded[key]!r}")
        out[key] = given[key] if given[key] is not None else recorded[key]
    if out["n_layers"] is None:
        raise InContextTDError(
            f"{path}: an 'auto' (tied) model's depth is not in the file and there is no "
            f"params.json beside it; give --n-layers"
        )
    for key, flag in (("gamma", "--gamma"), ("activation", "--activation")):
        if out[key] is None:
            raise InContextTDError(
                f"{path}: the run's {key} is not in the file and there is no params.json beside "
                f"it; give {flag} (a wrong {key} would import a model that predicts wrongly)"
            )
    act = out["activation"]
    if act not in ACTIVATION_NAMES:
        why = (
            "InContextTD's softmax normalises across query columns, so values at several states would need one "
            "prompt each"
            if act == "softmax"
            else f"this project's linear model implements {sorted(ACTIVATION_NAMES)} only"
        )
        raise InContextTDError(f"{path}: activation {act!r} is not supported: {why}")
    out["activation"], out["tied"] = ACTIVATION_NAMES[act], tied
    return out


def _check_recorded(params_file: Path, recorded: dict[str, Any]) -> None:
    """The settings params.json holds, checked where they are read (an error names that file)."""
    layers, gamma, act = recorded["n_layers"], recorded["gamma"], recorded["activation"]
    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int) or layers < 1):
        raise InContextTDError(f"{params_file}: l must be an integer >= 1, got {layers!r}")
    if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < 1):
        raise InContextTDError(f"{params_file}: gamma must be a number in [0, 1), got {gamma!r}")
    if act is not None and not isinstance(act, str):
        raise InContextTDError(f"{params_file}: activation must be a name, got {act!r}")


def _our_names(P: torch.Tensor, Q: torch.Tensor, config: LinearICTDConfig) -> dict[str, torch.Tensor]:
    layers = 1 if config.tied else config.n_layers
    return {
        f"blocks.{l}.attn.{name}": W[min(l, layers - 1)].float().clone()
        for l in range(config.n_layers)
        for name, W in (("P", P), ("Q", Q))
    }
