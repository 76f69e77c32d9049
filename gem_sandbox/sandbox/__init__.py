"""Sandboxes: the API, the pool, and the backends that run them."""
