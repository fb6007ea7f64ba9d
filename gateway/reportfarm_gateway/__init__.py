"""The gateway (``reportfarm gateway``): the farm's HTTP front door, one aiohttp service.

- :mod:`.app`: ``create_app(settings)``, its resources (storage client, webhook dispatcher) as
  cleanup contexts, auth and quota middleware, health and metrics; ``serve`` for the CLI.
- :mod:`.reports`: ``POST /v1/reports`` (waits up to ``wait_s``, then the PDF or 202 and a
  Location) and ``GET /v1/reports/{id}``.
- :mod:`.batching`: ``/v1/batches``: submit (JSON array or JSONL), state, retry, merged PDF.
- :mod:`.quotas`: per-tenant token bucket and in-flight cap (429); :mod:`.backpressure`: the
  cached queue depth (503).
- :mod:`.openapi`: the OpenAPI 3 document served at ``/openapi.json``.
- :mod:`.webhooks`: the webhook dispatcher: signed job and batch completion POSTs, at least once.
"""
