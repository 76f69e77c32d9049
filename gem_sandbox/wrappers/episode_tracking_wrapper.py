"""GEM's module path for the episode tracking wrapper (``gem.wrappers.episode_tracking_wrapper``)."""

from gem_sandbox.wrappers.episode_tracking import EpisodeTrackingWrapper

__all__ = ["EpisodeTrackingWrapper"]
