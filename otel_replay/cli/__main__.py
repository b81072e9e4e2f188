"""``python -m otel_replay.cli``: the ``otel-replay`` command, as the console script runs it.

It must never do anything but call ``main()``.
"""

from __future__ import annotations

from . import main

main()
