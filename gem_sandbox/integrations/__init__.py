"""Drop-in integrations that route other projects' code execution through gem-sandbox."""
