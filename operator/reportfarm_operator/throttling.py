"""Rate-limited logging of repeated failures: the first with its traceback, then a summary at
most every ``every`` seconds, so a pool failing every tick does not flood the log.

Every warning the scaling loop would repeat each tick goes through one of these: a failing tick
(``ticking``), a failing resize (``scaling.resize_pools``, per pod), an Event not posted. A
new message for the same key (another reason) is logged at once: it is a change."""

from __future__ import annotations

import dataclasses
import logging
import time


@dataclasses.dataclass
class _Seen:
    first_logged: float
    last_logged: float
    suppressed: int = 0


class LogThrottle:
    """Log a failure for ``key`` (a pool) with ``message``; repeats of the same message within
    ``every`` seconds are counted, not logged."""

    def __init__(self, logger: logging.Logger, *, every: float = 300.0) -> None:
        self.logger = logger
        self.every = every
        self._seen: dict[tuple[str, str], _Seen] = {}

    def failure(
        self,
        key: str,
        message: str,
        *,
        error: BaseException | None = None,
        level: int = logging.ERROR,
    ) -> bool:
        """Log it unless it was logged recently; returns whether it was logged."""
        now = time.monotonic()
        self._forget_stopped(now)
        seen = self._seen.get((key, message))
        if seen is None:
            self._seen[(key, message)] = _Seen(first_logged=now, last_logged=now)
            self.logger.log(level, "%s: %s", key, message, exc_info=error, extra={"pool": key})
            return True
        if now - seen.last_logged < self.every:
            seen.suppressed += 1
            return False
        self.logger.log(
            level,
            "%s: %s (again, %d more time(s) since the last report)",
            key,
            message,
            seen.suppressed + 1,
            extra={"pool": key, "repeated": seen.suppressed + 1},
        )
        seen.last_logged, seen.suppressed = now, 0
        return True

    def _forget_stopped(self, now: float) -> None:
        """Drop failures not seen for an hour (and two intervals: a repeat refreshes them every
        ``every`` s), so keys of pods long gone do not pile up."""
        after = max(2 * self.every, 3600.0)
        stale = [k for k, seen in self._seen.items() if now - seen.last_logged > after]
        for k in stale:
            del self._seen[k]

    def success(self, key: str) -> None:
        """The pool works again: its next failure is logged at once, with its traceback."""
        for seen_key in [k for k in self._seen if k[0] == key]:
            del self._seen[seen_key]
