"""The package version (GEM's ``gem.__about__``)."""

__version__ = "0.1.0"
