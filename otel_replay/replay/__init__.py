"""Replay of recorded runs and comparison of runs: the engine, its matching and safety rules, and the diff.

Import from the submodules (for example :mod:`otel_replay.replay.diff`); this package exports nothing itself.
"""
