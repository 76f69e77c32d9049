"""The gem-sandbox environment catalogue, registered through the ``gem_sandbox.envs`` entry point."""


def register_envs() -> None:
    from gem_sandbox_envs.games import register_all

    register_all()
