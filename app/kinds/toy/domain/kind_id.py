"""The id stored on the catalog entries of this kind; in the domain, the lowest layer, so every layer may import it."""
from __future__ import annotations

KIND_ID = "toy"
