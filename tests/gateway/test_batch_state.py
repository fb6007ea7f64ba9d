"""A batch's state from its items' records: a table of cases, no I/O."""

from __future__ import annotations

import pytest

from reportfarm import batches, contract


def record(index: int, state: str, *, submitted_at: float = 100.0) -> contract.ResultRecord:
    return contract.ResultRecord(
        job_id=contract.batch_item_job_id("b", index),
        state=state,  # type: ignore[arg-type]
        error=None if state == "succeeded" else "boom",
        submitted_at=submitted_at,
        finished_at=submitted_at + 1,
        batch_id="b",
        item_index=index,
    )


MANIFEST = contract.BatchManifest(batch_id="b", count=3)


@pytest.mark.parametrize(
    ("records", "retries", "state", "counts"),
    [
        pytest.param({}, [], "RUNNING", (0, 0, 3), id="nothing-yet"),
        pytest.param(
            {0: record(0, "succeeded"), 1: record(1, "failed")}, [], "RUNNING", (1, 1, 1),
            id="one-left",
        ),
        pytest.param(
            {i: record(i, "succeeded") for i in range(3)}, [], "COMPLETED", (3, 0, 0), id="all-ok"
        ),
        pytest.param(
            {i: record(i, "failed") for i in range(3)}, [], "FAILED", (0, 3, 0), id="all-failed"
        ),
        pytest.param(
            {0: record(0, "succeeded"), 1: record(1, "failed"), 2: record(2, "succeeded")},
            [], "PARTIAL_FAILED", (2, 1, 0), id="partial",
        ),
        pytest.param(
            {0: record(0, "succeeded"), 1: record(1, "failed"), 2: record(2, "succeeded")},
            [contract.BatchRetry(at=200.0, items=(1,))], "RUNNING", (2, 0, 1),
            id="retried-record-is-stale",
        ),
        pytest.param(
            {0: record(0, "succeeded"), 1: record(1, "succeeded", submitted_at=200.5),
             2: record(2, "succeeded")},
            [contract.BatchRetry(at=200.0, items=(1,))], "COMPLETED", (3, 0, 0),
            id="retried-and-rendered-again",
        ),
        pytest.param(
            {i: record(i, "succeeded") for i in range(5)}, [], "COMPLETED", (3, 0, 0),
            id="records-past-the-count-ignored",
        ),
    ],
)  # fmt: skip
def test_the_state_of_a_batch(
    records: dict[int, contract.ResultRecord],
    retries: list[contract.BatchRetry],
    state: str,
    counts: tuple[int, int, int],
) -> None:
    status = batches.summarize(MANIFEST, records, retries)
    assert status.state == state
    assert (status.succeeded, status.failed, status.running) == counts
    assert status.retries == len(retries)


def test_failed_items_come_in_item_order_with_their_reasons() -> None:
    manifest = contract.BatchManifest(batch_id="b", count=4)
    records = {index: record(index, "failed") for index in (3, 0)}
    records.update({1: record(1, "succeeded"), 2: record(2, "succeeded")})
    status = batches.summarize(manifest, records)
    assert [(item.index, item.error) for item in status.failed_items] == [(0, "boom"), (3, "boom")]
    assert status.p50_s == pytest.approx(1.0)


def test_batch_item_job_ids_round_trip_and_batch_ids_are_bounded() -> None:
    job_id = contract.batch_item_job_id("month-end.2026-05", 42)
    assert contract.split_batch_item_job_id(job_id) == ("month-end.2026-05", 42)
    assert contract.split_batch_item_job_id("0123abcd") is None
    with pytest.raises(contract.ContractError):
        contract.validate_batch_id("x" * 101)
    with pytest.raises(contract.ContractError):
        contract.validate_batch_id("../etc")
