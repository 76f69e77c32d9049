"""Backends: where a sandbox runs (bubblewrap, Docker, a plain process)."""
