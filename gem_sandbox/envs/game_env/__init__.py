"""GEM's ``gem.envs.game_env``: one module per text game, each re-exporting the catalogue's
class lazily (see :mod:`gem_sandbox.envs._lazy`)."""
