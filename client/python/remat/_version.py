"""The package's version: the one place it is written (pyproject.toml reads
it, and so do the daemon's package and the CMake client's install)."""

__version__ = "0.2.0"
