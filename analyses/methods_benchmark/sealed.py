"""The benchmark's splits, as MIB keeps a private one: ``public`` cases are drawn from seeds 0, 1, 2, ... for
development; ``private`` ones from seeds a key file decides, ``HMAC-SHA-256(key, "case:k")``, which only the driver
reads. A method on the private split gets a ``Problem`` named ``sealed`` whose ``seed`` is drawn from the key too
(for its own random draws), so nothing it holds names the case's seed: ``build_case(CASES[problem.name],
problem.seed)`` fails. The request records the key's fingerprint (its SHA-256's first 16 hex digits), never the
key; cells of the private split are saved by their index ``k``."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SPLITS = ("public", "private")
SEALED = "sealed"  # the name a private split's Problem carries


@dataclass(frozen=True)
class Split:
    name: str = "public"
    key: Optional[bytes] = None

    @classmethod
    def read(cls, name: str, key_file: Optional[str] = None) -> "Split":
        """A split by name; ``private`` needs a key file (read whole, at least 16 bytes), ``public`` takes none."""
        if name not in SPLITS:
            raise ValueError(f"split: must be one of {SPLITS}, got {name!r}")
        if name == "public":
            if key_file is not None:
                raise ValueError(f"--key-file {key_file}: only the private split takes a key (--split private)")
            return cls()
        if key_file is None:
            raise ValueError("--key-file: the private split draws its cases from a key; give its file")
        path = Path(key_file)
        if not path.is_file():
            raise FileNotFoundError(f"--key-file {key_file}: no such file")
        key = path.read_bytes()
        if len(key) < 16:
            raise ValueError(f"--key-file {key_file}: {len(key)} bytes; a key needs at least 16")
        return cls(name, key)

    def _draw(self, text: str) -> int:
        return int(hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()[:12], 16)

    def seed(self, case: str, k: int) -> int:
        """The seed case ``case``'s ``k``-th cell is built from."""
        return k if self.key is None else self._draw(f"{case}:{k}")

    def problem_seed(self, case: str, k: int) -> Optional[int]:
        """The seed a method's ``Problem`` carries on the private split (None: the case's own, public)."""
        return None if self.key is None else self._draw(f"problem:{case}:{k}")

    def fingerprint(self) -> Optional[str]:
        return None if self.key is None else hashlib.sha256(self.key).hexdigest()[:16]

    def cell_file(self, case: str, k: int) -> str:
        return f"{case}-s{k}.json" if self.key is None else f"private-{case}-s{k}.json"


PUBLIC = Split()
