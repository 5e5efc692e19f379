"""Named, seeded random streams.

Every random draw in vmc-sim comes from a stream identified by ``(run seed, purpose, keys)``.
The seed of a stream is a hash of that triple, so a client's training stream depends only on
the run seed and the client id, never on when or in which order it was drawn. Every stream
that is opened is remembered so that the run manifest can list it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Purpose = str

#: The purposes used by the toolkit; other code may add its own, these are documented here.
KNOWN_PURPOSES: dict[str, str] = {
    "init": "initial model weights W0",
    "partition": "split of a dataset among clients",
    "validation": "the server's held-out validation samples (merge regularisation selection)",
    "subset": "F-SOSA subset sampling and its edit couplings",
    "train": "a client's local training (shuffling), keyed by client id",
    "fisher": "labels drawn from the model for the true Fisher, keyed by client id",
    "channel": "channel fading and noise",
    "sumo": "SUMO's own seed",
    "mia": "membership-inference audit sampling",
    "select": "per-round client sampling of multi-round strategies, keyed by method and round",
}


def derive_seed(run_seed: int, purpose: Purpose, *keys: Any) -> int:
    """Return a 63-bit seed for ``(run_seed, purpose, keys)``, stable across processes."""
    if not isinstance(run_seed, (int, np.integer)) or run_seed < 0:
        raise ValueError(f"run seed must be a non-negative integer, got {run_seed!r}")
    text = "/".join([str(int(run_seed)), purpose, *[repr(k) for k in keys]])
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass
class Streams:
    """Factory of named streams for one run; remembers every seed it handed out."""

    run_seed: int
    issued: dict[str, int] = field(default_factory=dict)

    def seed(self, purpose: Purpose, *keys: Any) -> int:
        """The seed of stream ``purpose/keys`` (recorded for the manifest)."""
        s = derive_seed(self.run_seed, purpose, *keys)
        self.issued["/".join([purpose, *[repr(k) for k in keys]])] = s
        return s

    def numpy(self, purpose: Purpose, *keys: Any) -> np.random.Generator:
        """A fresh numpy Generator for stream ``purpose/keys``."""
        return np.random.default_rng(self.seed(purpose, *keys))

    def torch(self, purpose: Purpose, *keys: Any):  # -> torch.Generator
        """A fresh CPU torch Generator for stream ``purpose/keys``."""
        import torch

        g = torch.Generator(device="cpu")
        g.manual_seed(self.seed(purpose, *keys))
        return g

    def manifest(self) -> dict[str, Any]:
        """JSON-ready description: the run seed and every stream seed issued so far."""
        return {"run_seed": int(self.run_seed), "streams": dict(sorted(self.issued.items()))}
