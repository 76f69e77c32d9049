"""GEM's seeding helpers (``gem.utils.seeding``).

Envs here draw from a generator of their own (``self.rng``), so that envs in one process are
independent; GEM's envs draw from the global ``random`` and ``numpy`` generators, which
:func:`set_seed` seeds. ``Env.reset(seed)`` reached through ``super()`` (GEM's pattern) calls it.
"""

from __future__ import annotations

import random

import numpy as np

#: GEM's names for numpy's generator type.
RNG = RandomNumberGenerator = np.random.Generator


def np_random(seed: int | None = None) -> tuple[np.random.Generator, int]:
    """A numpy generator seeded with ``seed`` (fresh entropy when None) and the entropy it was
    seeded from. ``seed`` must be a non-negative int (GEM raises a bare ``Exception``; this
    raises ``TypeError``/``ValueError``, which ``except Exception`` catches as well)."""
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"Seed must be a python integer, actual type: {type(seed)}")
        if seed < 0:
            raise ValueError(f"Seed must be greater or equal to zero, actual value: {seed}")
    seed_seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seed_seq)), seed_seq.entropy  # type: ignore[return-value]


def set_seed(seed: int | None = None) -> None:
    """Seed the global ``random`` and ``numpy`` generators, as GEM's base ``reset`` does."""
    random.seed(seed)
    np.random.seed(seed)
