"""An OpenRLHF agent file: a gem-sandbox catalogue env as OpenRLHF's multi-turn agent.

Give this file to OpenRLHF's PPO trainer (``--train.agent_func_path examples/openrlhf_agent_func.py``)
with a dataset whose label column holds each row's seed (``--data.label_key seed``), for example
the rows ``gem_sandbox.integrations.scoring.Scorer(env_id).rows(n)`` writes as JSON lines. The env
and GEM wrappers come from ``GEM_ENV_ID`` and ``GEM_ENV_WRAPPERS``
(``math:Arithmetic-v0`` and ``python_tool`` run the model's code in a sandbox).
"""

import os

from gem_sandbox.integrations.openrlhf import agent_executor

AgentExecutor = agent_executor(
    os.environ.get("GEM_ENV_ID", "game:GuessTheNumber-v0"),
    wrappers=os.environ.get("GEM_ENV_WRAPPERS", ""),
)
