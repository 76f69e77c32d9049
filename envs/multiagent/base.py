"""What the multi-agent games share: every agent reads the rules before its first observation."""

from __future__ import annotations

from typing import Any

from gem_sandbox.multiagent import MultiAgentEnv


class RulesFirstEnv(MultiAgentEnv):
    """A multi-agent game whose reset opens each agent's first observation with
    :meth:`instructions`, as GEM's text games open with their rules."""

    def instructions(self) -> str:
        """The rules, the same for every agent."""
        raise NotImplementedError

    def reset(
        self, seed: int | None = None, **kwargs: Any
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """The rules, then each agent's first observation."""
        observations, infos = super().reset(seed=seed, **kwargs)
        intro = self.instructions()
        return {a: f"{intro}\n{obs}" for a, obs in observations.items()}, infos
