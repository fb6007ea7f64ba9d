"""Which storage failures a retry can fix."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import aiohttp
from azure.core import exceptions as azure_errors

from reportfarm import outcomes


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


class StorageUnavailable(outcomes.TemporaryError):
    """A storage call failed in a way a retry may fix (:func:`is_transient`): temporary."""

    def __init__(self, operation: str, error: BaseException) -> None:
        super().__init__(f"{operation}: {type(error).__name__}: {error}")
        self.operation = operation
        self.error = error

    @property
    def description(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


@contextlib.contextmanager
def classified(operation: str) -> Iterator[None]:
    """Around a storage call: a transient failure becomes :class:`StorageUnavailable`, so the
    caller reads the type; any other failure passes unchanged."""
    try:
        yield
    except Exception as error:
        if is_transient(error):
            raise StorageUnavailable(operation, error) from error
        raise
