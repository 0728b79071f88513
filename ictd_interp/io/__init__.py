"""Files and where things come from: checkpoint folders (``checkpoint``: header and state dict, no model
class), the shipped models' folder and cards (``pretrained``), the machine fingerprint that decides the
bits of a CPU run (``provenance``) and progress bars (``progress``). Imports ``config`` only."""

from ictd_interp.io.checkpoint import CheckpointError, read_checkpoint, save_checkpoint
from ictd_interp.io.pretrained import list_pretrained, pretrained_path, resolve

__all__ = ["CheckpointError", "list_pretrained", "pretrained_path", "read_checkpoint", "resolve", "save_checkpoint"]
