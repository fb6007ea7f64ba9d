"""Sharing free browsers between the interactive and the bulk lane.

While no interactive job was seen for ``hold_s``, interactive is asked first and bulk takes every
browser left. While interactive traffic is live, bulk earns one browser for every ``weight``
interactive jobs started and claims it before interactive is asked (a weighted share: it never
starves); a browser interactive leaves free is held for it rather than handed to a long bulk
render. A bulk lane found empty while interactive traffic is live is not asked first again for
``recheck_s`` (a receive each time an interactive job came: at 2 concurrent synchronous requests
the renderer asked the empty bulk lane 1.6 times a job); a bulk job is then noticed within that
time, as an idle worker notices one within its longest pause. Pure
bookkeeping: the clock is injected, so the share is tested as a table.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class LaneShare:
    def __init__(
        self,
        *,
        weight: int = 3,
        hold_s: float = 2.0,
        recheck_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if weight < 1:
            raise ValueError("weight must be >= 1")
        self.weight = weight
        """Interactive jobs started per bulk job while both lanes have work."""
        self.hold_s = hold_s
        """How long after the last interactive job bulk stays limited to its share."""
        self.recheck_s = recheck_s
        """How long bulk, found empty while interactive traffic is live, is not asked first."""
        self._clock = clock
        self._seen_at = -float("inf")
        self._bulk_empty_at = -float("inf")
        self._credit = 1.0

    def interactive_live(self) -> bool:
        return self._clock() - self._seen_at < self.hold_s

    def interactive_started(self, count: int) -> None:
        if count:
            self._seen_at = self._clock()
            self._credit = min(float(self.weight), self._credit + count / self.weight)

    def bulk_first(self, room: int) -> int:
        """Browsers bulk claims before interactive is asked: its earned share, while
        interactive traffic is live (else interactive goes first and bulk takes the rest), and
        unless bulk was found empty less than ``recheck_s`` ago."""
        if not self.interactive_live() or self._clock() - self._bulk_empty_at < self.recheck_s:
            return 0
        return min(room, int(self._credit))

    def bulk_after(self, room: int) -> int:
        """Browsers interactive left free that bulk may take: all of them, unless interactive
        traffic is live (then they are held for it)."""
        return 0 if self.interactive_live() else room

    def bulk_started(self, count: int) -> None:
        """Count a bulk receive that gave ``count`` jobs (0: the lane was empty)."""
        if self.interactive_live():
            self._credit = max(0.0, self._credit - count)
            if not count:
                self._bulk_empty_at = self._clock()
