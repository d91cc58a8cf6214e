"""The OTLP/HTTP trace receiver: ``POST /otlp/v1/traces``. Apps already instrumented with
OpenTelemetry send their LLM calls here; each becomes an agent turn through the one stream
runner (``otlp.record``), read from the span by ``otlp.spans`` (Django-free)."""
