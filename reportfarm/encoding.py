"""Jobs in the form they are stored: built from a submission, checked, and encoded to the bytes
that go to the queue and the payload blob. Pure (no I/O, no client), so a caller may run it in
a worker process and hand back only bytes (the gateway does: reportfarm_gateway.checking).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from reportfarm import contract, finishing


@dataclasses.dataclass(frozen=True, kw_only=True)
class Submission:
    """One job to submit: a template and its data, with optional contract fields."""

    template: str
    data: Mapping[str, Any]
    job_id: str | None = None
    pdf: contract.PdfOptions | None = None
    output_blob: str | None = None
    batch_id: str | None = None
    item_index: int | None = None
    tenant: str | None = None
    lane: contract.Lane | None = None
    callback_url: str | None = None
    finish: finishing.Finish | None = None
    """What the PDF must be when it leaves (reportfarm.finishing); its attachments and Factur-X
    XML may name a file of ``files`` by its bare name."""
    files: Mapping[str, bytes] | None = None
    """The job's files by name (attachments, the Factur-X XML): uploaded to
    ``attachments/<job id>/<name>`` before the job is sent."""
    notify: str | None = None
    """The waiting gateway's ``address:port`` (``contract.Job.notify``): a hint, set by the
    gateway for the jobs its clients wait for."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class EncodedJob:
    """A job as it is stored: its queue message and, for data too large to go inline, the
    payload blob's bytes (written first)."""

    job_id: contract.JobId
    lane: contract.Lane
    item_index: int | None
    message: str
    """The queue message text (base64 of the job's JSON)."""
    payload: bytes | None
    """The data as ``payloads/<job id>.json`` stores it, or None (inline)."""


def build(item: Submission) -> contract.Job:
    """The job of a submission, validated (ContractError)."""
    job_id = item.job_id or (
        contract.batch_item_job_id(item.batch_id, item.item_index)
        if item.batch_id is not None and item.item_index is not None
        else contract.new_job_id()
    )
    job = contract.Job(
        job_id=contract.JobId(job_id),
        template=item.template,
        data=dict(item.data),
        output_blob=item.output_blob,
        pdf=item.pdf or contract.PdfOptions(),
        batch_id=item.batch_id,
        item_index=item.item_index,
        tenant=item.tenant,
        lane=item.lane,
        callback_url=item.callback_url,
        notify=item.notify,
        submitted_at=time.time(),
        finish=(
            _with_file_blobs(item.finish, job_id, item.files or {})
            if item.finish is not None
            else None
        ),
    )
    for name in item.files or {}:
        if not finishing.valid_file_name(name):
            raise contract.ContractError(f"file name {name!r} must be 1-100 of [A-Za-z0-9._-]")
    job.validate()
    return job


def encode(job: contract.Job) -> EncodedJob:
    """The job's stored form; ContractError when its data, as stored, is past the farm's limit
    (the limit counts these bytes, not a request's) or holds text UTF-8 cannot encode."""
    payload = None
    if not contract.fits_inline(job):
        payload = contract.payload_bytes(job.data or {})
        contract.check_data_size(len(payload), what=f"the data of job {job.job_id} (as stored)")
        job = dataclasses.replace(job, data=None, data_blob=contract.payload_blob(job.job_id))
    return EncodedJob(
        job_id=job.job_id,
        lane=job.lane or "bulk",
        item_index=job.item_index,
        message=contract.encode_message(job),
        payload=payload,
    )


def _with_file_blobs(
    finish: finishing.Finish, job_id: str, files: Mapping[str, bytes]
) -> finishing.Finish:
    """``finish`` with each bare file name of ``files`` replaced by the job's blob for it."""

    def blob(name: str) -> str:
        return finishing.attachment_blob(job_id, name) if name in files else name

    attachments = tuple(
        dataclasses.replace(attachment, blob=blob(attachment.blob))
        for attachment in finish.attachments
    )
    facturx = finish.facturx
    if facturx is not None:
        facturx = dataclasses.replace(facturx, xml_blob=blob(facturx.xml_blob))
    return dataclasses.replace(finish, attachments=attachments, facturx=facturx)
