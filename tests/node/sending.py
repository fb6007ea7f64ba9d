"""A sender through the gateway during maintenance: jobs at a fixed rate, spread over the
gateway's Ready endpoints as a Service's proxy would spread them.

This node runs no kube-proxy, so the sender does the proxy's part itself: it follows the
Service's EndpointSlices (every 0.5 s; kube-proxy reacts to the same objects) and sends each
request to the next Ready endpoint, or, when none is Ready, to a serving one that is terminating
(kube-proxy's fallback). A request is not retried: every refusal or failure is counted, and the
longest stretch in which the gateway answered nothing is the figure the issue bounds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
import time
import urllib.parse
from typing import Any

import aiohttp

from tests.harness import kube as kube_harness

REFRESH_S = 0.5


@dataclasses.dataclass(frozen=True, kw_only=True)
class Attempt:
    at: float
    """time.time() when the request was sent."""
    ok: bool
    detail: str
    """The job id, or the status / error of a failed request."""


def endpoints(plane: kube_harness.ControlPlane, *, namespace: str, service: str) -> list[str]:
    """``ip:port`` of the Service's Ready endpoints; if none, of its serving ones."""
    selector = urllib.parse.quote(f"kubernetes.io/service-name={service}")
    path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
    slices = plane.request("GET", f"{path}?labelSelector={selector}")["items"]
    ready, serving = [], []
    for piece in slices:
        port = next((p["port"] for p in piece.get("ports") or [] if p.get("port")), None)
        for endpoint in piece.get("endpoints") or []:
            conditions = endpoint.get("conditions") or {}
            addresses = [f"{a}:{port}" for a in endpoint.get("addresses") or []]
            if conditions.get("ready"):
                ready += addresses
            elif conditions.get("serving"):
                serving += addresses
    return sorted(ready) or sorted(serving)


class Sender:
    """POST /v1/reports (``wait_s`` 0) at ``rate`` per second, in a thread of its own, until
    :meth:`stop`. ``attempts`` holds every request's outcome."""

    def __init__(
        self,
        plane: kube_harness.ControlPlane,
        *,
        namespace: str,
        service: str,
        token: str,
        job: dict[str, Any],
        rate: float,
    ) -> None:
        self.plane, self.namespace, self.service = plane, namespace, service
        self.token, self.job, self.rate = token, job, rate
        self.attempts: list[Attempt] = []
        self._stop = threading.Event()
        self._targets: list[str] = []
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> Sender:
        self._targets = endpoints(self.plane, namespace=self.namespace, service=self.service)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    @property
    def job_ids(self) -> list[str]:
        return [a.detail for a in self.attempts if a.ok]

    async def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                self._targets = await asyncio.to_thread(
                    endpoints, self.plane, namespace=self.namespace, service=self.service
                )
            except OSError:  # the apiserver is busy: keep the last list, as a proxy would
                pass
            await asyncio.sleep(REFRESH_S)

    async def _run(self) -> None:
        follower = asyncio.create_task(self._follow())
        timeout = aiohttp.ClientTimeout(total=10)
        sent: set[asyncio.Task[None]] = set()
        async with aiohttp.ClientSession(timeout=timeout) as http:
            turn = itertools.count()
            start = time.monotonic()
            for index in itertools.count():
                if self._stop.is_set():
                    break
                await asyncio.sleep(max(0.0, start + index / self.rate - time.monotonic()))
                task = asyncio.create_task(self._send(http, next(turn), index))
                sent.add(task)
                task.add_done_callback(sent.discard)
            await asyncio.gather(*sent)
        follower.cancel()

    async def _send(self, http: aiohttp.ClientSession, turn: int, index: int) -> None:
        at = time.time()
        targets = self._targets
        if not targets:
            self.attempts.append(Attempt(at=at, ok=False, detail="no endpoint"))
            return
        target = targets[turn % len(targets)]
        body = {**self.job, "data": {**self.job["data"], "name": f"job {index}"}, "wait_s": 0}
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with http.post(f"http://{target}/v1/reports", json=body, headers=headers) as r:
                if r.status == 202:
                    found = await r.json()
                    self.attempts.append(Attempt(at=at, ok=True, detail=found["job_id"]))
                else:
                    detail = f"{target}: HTTP {r.status}"
                    self.attempts.append(Attempt(at=at, ok=False, detail=detail))
        except (aiohttp.ClientError, TimeoutError) as error:
            detail = f"{target}: {type(error).__name__} {error}"
            self.attempts.append(Attempt(at=at, ok=False, detail=detail))


def longest_outage(attempts: list[Attempt]) -> float:
    """The longest time from a failed request to the next one that succeeded (or to the last
    request): how long the front door answered nothing at a stretch. 0 if none failed."""
    longest, since = 0.0, None
    for attempt in sorted(attempts, key=lambda a: a.at):
        if not attempt.ok and since is None:
            since = attempt.at
        elif attempt.ok and since is not None:
            longest, since = max(longest, attempt.at - since), None
    if since is not None:
        longest = max(longest, max(a.at for a in attempts) - since)
    return longest
