"""GEM's multi-agent interface: one episode shared by several agents, every action and every
return keyed by agent id (``gem.multiagent``'s names and semantics)."""

from gem_sandbox.multiagent.multi_agent_env import (
    PARALLEL,
    SEQUENTIAL,
    AgentSelector,
    AgentState,
    InvalidActions,
    MultiAgentEnv,
    MultiStepReturn,
)

__all__ = [
    "PARALLEL",
    "SEQUENTIAL",
    "AgentSelector",
    "AgentState",
    "InvalidActions",
    "MultiAgentEnv",
    "MultiStepReturn",
]
