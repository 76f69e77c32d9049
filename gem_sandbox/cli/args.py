"""Argument types shared by the command modules, so every command words bad input alike."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def pair(text: str, flag: str) -> tuple[str, str]:
    """``NAME=VALUE`` as given to a repeatable ``flag`` such as ``--pool``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError(f"{flag} takes NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()
