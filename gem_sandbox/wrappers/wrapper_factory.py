"""GEM's module path for the wrapper factory (``gem.wrappers.wrapper_factory``).

``get_wrapper_fns(names, tokenizer)`` is GEM's call and returns what GEM's returns: one
callable per name that wraps an env. See :mod:`gem_sandbox.wrappers.factory`, which this
re-exports, for where the tools' sandboxes come from (``runtime=``).
"""

from gem_sandbox.wrappers.factory import TOKENIZER_REQUIRED, WRAPPER_FACTORY, get_wrapper_fns

__all__ = ["TOKENIZER_REQUIRED", "WRAPPER_FACTORY", "get_wrapper_fns"]
