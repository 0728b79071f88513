"""The predecessor's linear transformer: the hooked model (``model``) and its hand-built TD and control
constructions (``td``, ``control``). Imports ``config``, ``tasks`` and the shared modules of ``models``."""
