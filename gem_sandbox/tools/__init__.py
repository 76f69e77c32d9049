"""Tools an env exposes to the model: Python, shell, search, calculator."""
