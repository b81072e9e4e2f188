"""otel-replay: record AI-agent runs as OpenTelemetry traces and replay them."""
