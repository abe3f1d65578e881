"""Hindsight analyzer: bundle reading, parsing, storage, signals, detection and the CLI."""

__version__ = "0.1.0"
