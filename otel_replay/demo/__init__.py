"""A small support-desk agent that runs offline, used by ``otel-replay demo`` and the tests."""
