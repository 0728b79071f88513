"""The flags several commands share, torch-free: the training flags (``train``, and ``reproduce`` above the core),
the allocator switch and ``--threads``'s help."""

from __future__ import annotations

import argparse

from ictd_interp.cli.args import add_train_args, positive_int
from ictd_interp.config.train import MODEL_CONFIGS, PRESETS, TrainConfig

THREADS_HELP = (
    "torch CPU threads of this process (default: 1; two are somewhat faster on an idle machine and "
    "several times slower on a busy one, which gets a warning: docs/performance.md, benchmarks/threads.py)"
)


def preset_help() -> str:
    """Each preset with what it changes from its architecture's defaults (nested settings by their path)."""
    parts = []
    for name, preset in PRESETS.items():
        base = TrainConfig(model=MODEL_CONFIGS[preset.architecture](d_features=preset.model.d_features))
        parts.append(f"{name} ({preset.architecture}: {', '.join(base.differences(preset)) or 'the defaults'})")
    return "training preset; every flag below overrides it: " + "; ".join(parts)


def training_flags(p: argparse.ArgumentParser, name: str) -> None:
    """``--preset``, ``--out``, ``--threads``, the allocator and every training setting (``train`` or ``reproduce``)."""
    p.add_argument(
        "--preset",
        default=None,
        choices=sorted(PRESETS),
        help=preset_help()
        + " (default: the architecture's own quick preset: "
        + ", ".join(f"{cls.quick_preset} for {a}" for a, cls in MODEL_CONFIGS.items() if cls.quick_preset)
        + "; quick otherwise)",
    )
    out_help = "run folder" if name == "train" else "folder for run/ (training) and analysis/ (report)"
    p.add_argument("--out", required=name == "reproduce", help=out_help)
    if name == "train":
        p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help=THREADS_HELP.replace(
            "(default: 1;",
            "(default: 1, or the count a resumed run was trained with; a bit-exact resume needs the same count;",
        ),
    )
    allocator_flag(p)
    add_train_args(p)


def allocator_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="set glibc's allocator so each CPU step reuses warm pages (this command's processes only; "
        "faster, numbers unchanged; ictd_interp.training.allocator)",
    )


def import_flags(p: argparse.ArgumentParser) -> None:
    """``import-incontexttd``: the predecessor's log and what it does not record."""
    p.add_argument("path", help="its log folder (data.npz, params.json), its data.npz, or a torch.save'd state dict")
    p.add_argument("--out", required=True, help="checkpoint folder (with --all-steps: one sub-folder per logged step)")
    p.add_argument("--all-steps", action="store_true", help="one checkpoint per logged step, not only the last")
    p.add_argument(
        "--n-layers", type=positive_int, default=None, help="depth of a tied ('auto') model without params.json"
    )
    p.add_argument(
        "--gamma", type=float, default=None, help="discount of its prompts (default: params.json's, else 0.9)"
    )
    p.add_argument("--activation", default=None, help="identity or relu (default: params.json's, else identity)")
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")


def models_flags(p: argparse.ArgumentParser) -> None:
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--long", action="store_true", help="every card's description, command and verdict ladder")
    shape.add_argument("--json", action="store_true", help="the listing as JSON")
