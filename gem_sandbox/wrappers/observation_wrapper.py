"""GEM's module path for the observation wrapper (``gem.wrappers.observation_wrapper``)."""

from gem_sandbox.wrappers.observation import (
    ObservationWrapper,
    ObservationWrapperError,
    WrapperObsType,
    maybe_add_new_line,
)

__all__ = ["ObservationWrapper", "ObservationWrapperError", "WrapperObsType", "maybe_add_new_line"]
