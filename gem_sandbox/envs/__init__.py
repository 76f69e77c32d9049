"""GEM's ``gem.envs``: registration and the env modules, under GEM's paths.

``gem_sandbox.envs.registration`` is :mod:`gem_sandbox.registry`. The env modules
(``code_env``, ``math_env``, ``qa_env``, ``reasoning_gym``, ``game_env.*``) re-export the
catalogue's classes (the ``gem_sandbox_envs`` package) lazily, on first access: see
:mod:`gem_sandbox.envs._lazy` for why the library never imports the catalogue when it is
imported. Importing this package registers nothing either (GEM's registers every env): the
registry loads the catalogue on the first lookup by id.
"""
