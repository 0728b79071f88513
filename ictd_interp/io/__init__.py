"""Files and where things come from: checkpoint folders (``checkpoint``: header and state dict, no model class), the
shipped models' folder and cards (``pretrained``, torch-free: ``ictd-interp models`` lists them without importing
torch), the machine fingerprint that decides the bits of a CPU run (``provenance``), progress bars (``progress``),
outputs written whole or not at all (``staging``), the torch thread count the Python API sets (``threads``), how a
number is written for a reader (``text``), the predecessor's InContextTD logs read (``incontexttd``), and the layout
of training run folders and output folders (``run_folder``: what is a run, the request an output folder holds).
Imports ``config`` only; names load on first use."""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "CheckpointError": "checkpoint",
    "read_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "list_pretrained": "pretrained",
    "pretrained_path": "pretrained",
    "resolve": "pretrained",
    "load_run_config": "run_folder",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
