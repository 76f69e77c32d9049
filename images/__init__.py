"""The sandbox image's build context, installed as the ``gem_sandbox_images`` data package.

A regular package, not a namespace one, so that ``importlib.resources.files()`` finds it in
an editable install too (on Python 3.11 a namespace package there fails with
``NotADirectoryError``). :mod:`gem_sandbox.sandbox.backends.docker.images` reads ``sandbox/`` through it.
"""
