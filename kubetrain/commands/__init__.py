"""Subcommands of the ``kubetrain`` CLI, one module each."""
