"""Typed failures: whether a retry can help, said by the code that knows, read by the job runner.

As kopf's ``TemporaryError(delay=)``/``PermanentError`` and arq's ``Retry(defer=)``: the module
where a failure is understood raises one of these (the pool, the browser, the templates, the
contract, the storage stages); the renderer's job runner reads the type and never searches an
error's text. Both carry what the runner writes where users look:

- ``description``: the poison message's reason and the failed result record's ``error`` (an
  exhausted job's reason names its last error by it);
- ``kind``: a bounded label for ``reportfarm_poison_messages_total{reason=...}``.

Anything else a job raises counts as temporary (retried with backoff, then poisoned as
exhausted): an unknown error is not proof that the job is bad.
"""

from __future__ import annotations


class PermanentError(Exception):
    """Retrying cannot help (the document, the data or the template is wrong): the job goes to
    the poison queue at once, with a failed result record."""

    default_kind = "other"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or self.default_kind
        """The poison metric's label: few values, no user text."""

    @property
    def description(self) -> str:
        """What the poison queue and the result record say."""
        return str(self)


class TemporaryError(Exception):
    """A retry may help (a browser crashed, the pool is busy, storage is away): the job is
    released for another delivery after ``delay_s`` (None: the runner's backoff), and poisoned
    as exhausted once its deliveries reach the limit."""

    def __init__(self, message: str, *, delay_s: float | None = None) -> None:
        super().__init__(message)
        self.delay_s = delay_s
        """Seconds before the next delivery; None leaves it to the runner's backoff."""

    @property
    def description(self) -> str:
        """The last error named in an exhausted job's reason."""
        return f"{type(self).__name__}: {self}"
