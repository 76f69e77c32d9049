"""Backends: where a sandbox runs (bubblewrap, Docker, e2b, a remote pool)."""
