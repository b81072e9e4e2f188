"""The package version, in a leaf module so any layer can name it without importing the package facade."""

from __future__ import annotations

__version__ = "0.1.0"
