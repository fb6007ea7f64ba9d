"""Which storage failures a retry can fix."""

from __future__ import annotations

import aiohttp
from azure.core import exceptions as azure_errors


def is_transient(error: BaseException) -> bool:
    """True for failures that may pass: the service away, throttling, timeouts, 5xx."""
    if isinstance(
        error,
        azure_errors.ServiceRequestError
        | azure_errors.ServiceResponseError
        | aiohttp.ClientError
        | ConnectionError
        | TimeoutError,
    ):
        return True
    if isinstance(error, azure_errors.HttpResponseError):
        status = error.status_code or 0
        return status in (408, 429) or status >= 500
    return False
