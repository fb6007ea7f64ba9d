"""How the Azure SDK retries under our own backoff.

The SDK's default policy waits 15 s before its first retry (then 3^n), so one call against a
storage account that is away for 3 s took ~40 s to fail: the worker's own backoff, its readiness
report and the lease keeper all stalled behind it (found by the soak, scripts/soak.py). Two quick
SDK retries (a failing call gives up after ~4 s) ride out a blip; longer outages are the worker
loop's to back off from.
"""

from __future__ import annotations

from typing import Any

SDK_OPTIONS: dict[str, Any] = {
    "retry_total": 2,
    "initial_backoff": 0.3,
    "increment_base": 1.5,
    "random_jitter_range": 0.3,
    "connection_timeout": 5,
    "read_timeout": 30,
}
