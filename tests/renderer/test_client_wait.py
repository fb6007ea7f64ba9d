"""The client's wait reads records oldest first, a window at a time, against a real Azurite."""

from __future__ import annotations

import time

import pytest

from reportfarm import contract
from reportfarm.client import ReportFarmClient

pytestmark = [pytest.mark.azurite]


def _record(job_id: str) -> contract.ResultRecord:
    return contract.ResultRecord(job_id=job_id, state="succeeded", finished_at=time.time())


class Counting:
    """Counts the record reads ``wait`` makes (the reads themselves go to Azurite)."""

    def __init__(self, client: ReportFarmClient) -> None:
        self.reads: list[str] = []
        self._result = client.result

        async def result(job_id: str) -> contract.ResultRecord | None:
            self.reads.append(job_id)
            return await self._result(job_id)

        client.result = result  # type: ignore[method-assign]


async def test_a_poll_reads_the_ended_jobs_and_one_window_not_every_pending_job(
    client: ReportFarmClient,
) -> None:
    job_ids = [contract.new_job_id() for _ in range(100)]
    for job_id in job_ids[:30]:
        await client.blobs.put_result(_record(job_id))
    counting = Counting(client)
    seen: list[str] = []
    results = await client.wait(
        job_ids, timeout_s=0.0, poll_s=0.0, window=8, on_result=lambda r: seen.append(r.job_id)
    )
    assert seen == job_ids[:30]  # each ended job reported once, oldest first
    assert [job_id for job_id, record in results.items() if record] == job_ids[:30]
    # One poll: the 30 ended records and the window that holds the first missing one (30..31),
    # then the deadline's sweep of the 70 still pending; never 100 reads a poll.
    assert counting.reads == job_ids[:32] + job_ids[30:]


async def test_a_job_that_ends_out_of_order_is_seen_by_a_sweep(client: ReportFarmClient) -> None:
    job_ids = [contract.new_job_id() for _ in range(40)]
    late = job_ids[25]
    await client.blobs.put_result(_record(late))  # ends before the 25 sent ahead of it
    counting = Counting(client)
    results = await client.wait(job_ids, timeout_s=5.0, poll_s=0.05, window=8, sweep_s=0.3)
    assert results[late] is not None and results[job_ids[0]] is None
    sweeps = [index for index, job_id in enumerate(counting.reads) if job_id == late]
    assert sweeps == [sweeps[0]]  # read once: found, never read again
    assert counting.reads.count(job_ids[0]) > 2  # the head is polled; the tail was not, until swept
    assert counting.reads.count(job_ids[-1]) < counting.reads.count(job_ids[0])
