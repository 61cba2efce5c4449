"""The names of a node's metric figures: which keys are stamps, not figures, and which
figures come first (return, reward, loss, rates, steps). The launcher's metrics store,
the live view, ``topo status`` and ``topo plot`` all rank keys here; it imports nothing,
so the commands that only read a run stay light."""

from __future__ import annotations

STAMPS = ("time", "node", "label")  # what the logger adds to every row; not figures
# Key figures first: a key containing an earlier fragment ranks higher.
PREFERRED = ("return", "reward", "loss", "steps_per_s", "sps", "fps", "step", "episode")


def rank_keys(keys: list[str]) -> list[str]:
    """``keys`` with return/reward/loss/steps-per-second/step-like keys first (in that
    order), the others after them in their own order."""

    def rank(item: tuple[int, str]) -> tuple[int, int]:
        index, key = item
        low = key.lower()
        hits = [i for i, fragment in enumerate(PREFERRED) if fragment in low]
        return (hits[0] if hits else len(PREFERRED), index)

    return [key for _, key in sorted(enumerate(keys), key=rank)]
