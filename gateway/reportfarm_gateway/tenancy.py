"""Batch ids per tenant: two tenants may use the same batch id and never share anything.

A tenant names its batch (``?batch_id=month-end``) or the gateway draws a random name; the farm
stores it as ``<tenant tag>.<name>`` (:func:`stored_batch_id`), the tag a digest of the tenant.
Its items' job ids, ``pdf/<job id>.pdf`` and attachments follow the stored id, so another
tenant's batch of the same name is another batch, and asking for it is the "not found" of a name
nobody used: same reads, same answer. The gateway shows the tenant its own name
(:func:`shown_batch_id`) in answers and webhooks; item job ids carry the stored id.
"""

from __future__ import annotations

import hashlib

from reportfarm import contract

TAG_LENGTH = 11
"""``t`` and 10 hex digits of the tenant's SHA-256."""
NAME_MAX = contract.BATCH_ID_MAX - TAG_LENGTH - 1
"""The longest batch name a tenant may give: the stored id stays within the contract's limit."""
NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_MAX - 1}}}$"


def tenant_tag(tenant: str) -> str:
    return "t" + hashlib.sha256(tenant.encode("utf-8")).hexdigest()[: TAG_LENGTH - 1]


def stored_batch_id(tenant: str, name: str) -> str:
    """The farm's batch id for the tenant's batch ``name`` (ContractError for a bad name)."""
    contract.validate_batch_id(name)
    if len(name) > NAME_MAX:
        raise contract.ContractError(f"batch id {name[:120]!r} is longer than {NAME_MAX}")
    return f"{tenant_tag(tenant)}.{name}"


def shown_batch_id(tenant: str | None, stored: str) -> str:
    """The name the tenant gave (the stored id itself for batches not made by the gateway)."""
    if tenant is None:
        return stored
    return stored.removeprefix(f"{tenant_tag(tenant)}.")


def stored_job_id(tenant: str, job_id: str) -> str:
    """A job id as the tenant writes it -> the farm's: a batch item's ``<name>-<index>`` is its
    item of the tenant's batch ``name``; any other id is the same in both."""
    item = contract.split_batch_item_job_id(job_id)
    if item is None:
        return job_id
    try:
        return contract.batch_item_job_id(stored_batch_id(tenant, item[0]), item[1])
    except contract.ContractError:
        return job_id


def shown_job_id(tenant: str | None, job_id: str) -> str:
    """The farm's job id -> the tenant's (see :func:`stored_job_id`)."""
    item = contract.split_batch_item_job_id(job_id)
    if item is None or tenant is None:
        return job_id
    return contract.batch_item_job_id(shown_batch_id(tenant, item[0]), item[1])
