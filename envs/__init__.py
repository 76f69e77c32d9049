"""The gem-sandbox environment catalogue, registered through the ``gem_sandbox.envs`` entry point."""


def register_envs() -> None:
    from gem_sandbox_envs import code, games, math, multiagent, qa, rg, terminal

    games.register_all()
    math.register_all()
    rg.register_all()
    code.register_all()
    qa.register_all()
    terminal.register_all()
    multiagent.register_all()
