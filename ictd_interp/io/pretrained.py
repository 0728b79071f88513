"""Pretrained models shipped with the package, by name (``from_pretrained("depth3-td-s0")``).

Each lives in ``ictd_interp/pretrained/<name>/``: the checkpoint (``model.safetensors`` and its
header ``config.json``), its training curves (``metrics.jsonl``) and ``card.json``, its provenance: the command that
trained it, its full
``TrainConfig``, the training metrics at the end, and its ``fingerprint``: what decides the bits of a CPU
run (``provenance.fingerprint``: torch, MKL and oneDNN versions, thread count, CPU model and the
instruction-set flags the kernels dispatch on). Re-running the command on a machine with the same
fingerprint reproduces the weights bit for bit; on any other machine within ``cross_machine_rtol`` of the
largest weight (``ictd_interp.training.retraining``; measured in docs/theory.md §11).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, Union

PRETRAINED_DIR = Path(__file__).parent.parent / "pretrained"  # ictd_interp/pretrained/<name>/
CARD = "card.json"
PREFIX = "prefix.safetensors"  # the weights after the card's ``prefix_steps``, for a quick retrain check
HEADLINE = ("eval_msve", "theta_star_msve", "cos_A", "cos_V", "signature_match")


def names() -> list[str]:
    return sorted(p.parent.name for p in PRETRAINED_DIR.glob(f"*/{CARD}"))


def card(name: str) -> dict[str, Any]:
    return json.loads((pretrained_path(name) / CARD).read_text())


def list_pretrained() -> list[dict[str, Any]]:
    """Every shipped model: name, one-line description, headline metrics and the training command."""
    out = []
    for name in names():
        c = card(name)
        out.append(
            {
                "name": name,
                "description": c["description"],
                "what": what(c["train_config"]),
                "command": c["command"],
                **{k: c["final_metrics"].get(k) for k in HEADLINE},  # None: not measured for that architecture
                "learns_in_context": c.get("in_context", {}).get("learns_in_context"),
                "level": c.get("in_context", {}).get("level"),
                "msve_interval": c.get("in_context", {}).get("msve_interval"),
                "ladder": c.get("in_context", {}).get("ladder"),
            }
        )  # ictd_interp.analyses.cards
    return out


def what(config: dict[str, Any]) -> str:
    """A card's training in a few words, from its config: ``stylised, 12 tied layers, td, 1500 steps``."""
    model, tasks = config["model"], config["tasks"]
    parts = [
        config.get("architecture", "stylised"),
        f"{model['n_layers']} {'tied ' if model.get('tied') else ''}layers",
        config["objective"] + (" on shuffled rewards" if config.get("shuffle_rewards") else ""),
        f"{config['steps']} steps",
    ]
    if model.get("mask") == "full":
        parts.insert(2, "no mask")
    if config.get("train_depths"):
        parts.insert(2, f"depths {config['train_depths']}")
    recipe = [
        *(["warm-up"] if config.get("warmup_steps") else []),
        *([config["lr_schedule"]] if config.get("lr_schedule", "constant") != "constant" else []),
        *([f"clip {config['grad_clip']:g}"] if config.get("grad_clip") else []),
        *([f"spectral penalty {config['spectral_penalty']:g}"] if config.get("spectral_penalty") else []),
    ]
    if recipe:
        parts.insert(-1, " + ".join(recipe))
    if tasks["family"] != "boyan" or tasks["context_len"] != 30:
        parts.append(f"{tasks['family']}, n = {tasks['context_len']}")
    return ", ".join(parts)


def pretrained_path(name: str) -> Path:
    folder = PRETRAINED_DIR / name
    if not (folder / CARD).exists():
        from ictd_interp.io.checkpoint import CheckpointNotFoundError  # torch: only when a name is wrong

        raise CheckpointNotFoundError(unknown_model(name))
    return folder


def unknown_model(name: str) -> str:
    """The one line for a name that is neither a path nor a shipped model, with the closest names."""
    if "/" in name or name.startswith(("~", ".")):  # a path: the model names are beside the point
        return f"{name}: no such run folder or checkpoint (a path; `ictd-interp models` lists the shipped names)"
    known = names()
    close = closest_names(name, known)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"{name}: no such pretrained model or path.{hint} Known models: {', '.join(known)}"


LOOK_ALIKE = str.maketrans({"O": "0", "o": "0", "l": "1", "I": "1"})  # letters typed for digits


def closest_names(name: str, known: list[str]) -> list[str]:
    """The known names a mistyped one most likely meant: an exact match once look-alike letters are read
    as digits (``quick-td-sO`` -> ``depth3-td-s0``) first, then difflib's closest (up to three)."""
    alike = [k for k in known if k.translate(LOOK_ALIKE) == name.translate(LOOK_ALIKE)]
    return [*alike, *(k for k in difflib.get_close_matches(name, known, n=3) if k not in alike)][:3]


MODEL_FILES = ("config.json", "model.safetensors", "train_config.json")  # checkpoint.CONFIG, .WEIGHTS; TRAIN_CONFIG


def holds_model(path: Union[str, Path]) -> bool:
    """Whether ``path`` is a model a command can read: a file, or a folder holding a checkpoint or a run (torch-free:
    the command line decides with it before loading anything)."""
    local = Path(path)
    return local.is_file() or any((local / name).exists() for name in MODEL_FILES)


def model_argument(path: str) -> Path:
    """The model a command reads: a shipped model's name wins over a folder of that name holding no model (an
    output folder named after the model never shadows it), else the path as given."""
    return pretrained_path(path) if path in names() and not holds_model(path) else Path(path)


def resolve(name_or_path: Union[str, Path]) -> Path:
    """A path that exists is used as it is; anything else must be a registry name."""
    path = Path(name_or_path)
    return path if path.exists() else pretrained_path(str(name_or_path))
