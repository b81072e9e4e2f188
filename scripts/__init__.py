"""The repository's own tools (not part of the package): run from the repository root."""
