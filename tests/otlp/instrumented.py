"""Real instrumented clients: the OpenTelemetry SDK with its OTLP/HTTP exporter, configured
only by the two environment variables the README gives, and an instrumentation of the official
``openai`` SDK (OpenInference's, or the OpenTelemetry contrib ``openai-v2``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def instrumented(which: str, monkeypatch: pytest.MonkeyPatch, url: str,
                 headers: str) -> Iterator[Any]:
    """An instrumentation active for the block; each span is exported when it ends
    (``SimpleSpanProcessor``), so the receiver has answered once the call returns."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{url}/otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", headers)
    exporter = OTLPSpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if which == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    elif which == "openinference-anthropic":
        from openinference.instrumentation.anthropic import (  # type: ignore[no-redef]
            AnthropicInstrumentor as OpenAIInstrumentor,
        )
    elif which == "openinference-google":
        from openinference.instrumentation.google_genai import (  # type: ignore[no-redef]
            GoogleGenAIInstrumentor as OpenAIInstrumentor,
        )
    else:  # the contrib instrumentation, content on the span (the latest GenAI conventions)
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        from opentelemetry.instrumentation.openai_v2 import (  # type: ignore[no-redef]
            OpenAIInstrumentor,
        )
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
