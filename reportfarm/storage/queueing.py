"""The job queue (Azure Storage Queue), as the farm uses it: receive, extend, delete, poison."""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime

from azure.core import exceptions as azure_errors

from reportfarm import contract
from reportfarm.storage import accounts

logger = logging.getLogger(__name__)

MAX_BATCH = 32
"""Azure returns at most 32 messages per Get Messages call."""


@dataclasses.dataclass
class Delivery:
    """One received message. ``pop_receipt`` changes each time its visibility is extended."""

    message_id: str
    pop_receipt: str
    dequeue_count: int
    content: str
    inserted_on: datetime | None = None


class JobQueue:
    """A queue and its poison queue, in one storage account (or connection string)."""

    def __init__(self, account: accounts.Account | str, name: str) -> None:
        self.name = name
        self.poison_name = contract.poison_queue_name(name)
        self._queue = accounts.of(account).queue_client(name)
        self._poison = accounts.of(account).queue_client(self.poison_name)

    async def __aenter__(self) -> JobQueue:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._queue.close()
        await self._poison.close()

    async def ensure(self) -> None:
        """Create the queue and its poison queue if they are missing."""
        for client in (self._queue, self._poison):
            try:
                await client.create_queue()
            except azure_errors.ResourceExistsError:
                pass

    async def send(self, content: str, *, delay_s: int = 0) -> str:
        message = await self._queue.send_message(content, visibility_timeout=delay_s or None)
        return str(message.id)

    async def send_held(self, content: str, *, held_s: int) -> Delivery:
        """Send a message that stays invisible for ``held_s`` seconds, and its delivery: Azure
        answers a put with the message's pop receipt, so whoever is handed this delivery owns
        the message as if it had received it (extend, delete, poison), with no receive. Not
        handed to anyone, :meth:`release` makes it visible at once. Its dequeue count is 0
        until a receive takes it; the delivery counts this as the first attempt."""
        message = await self._queue.send_message(content, visibility_timeout=max(1, held_s))
        return Delivery(
            message_id=str(message.id),
            pop_receipt=message.pop_receipt or "",
            dequeue_count=1,
            content=content,
            inserted_on=message.inserted_on,
        )

    async def receive(self, *, max_messages: int, visibility_timeout: int) -> list[Delivery]:
        count = max(1, min(MAX_BATCH, max_messages))
        pages = self._queue.receive_messages(
            messages_per_page=count, max_messages=count, visibility_timeout=visibility_timeout
        )
        return [
            Delivery(
                message_id=message.id,
                pop_receipt=message.pop_receipt or "",
                dequeue_count=message.dequeue_count or 1,
                content=message.content if isinstance(message.content, str) else "",
                inserted_on=message.inserted_on,
            )
            async for message in pages
        ]

    async def extend(self, delivery: Delivery, *, visibility_timeout: int) -> None:
        """Keep the message invisible for another ``visibility_timeout`` seconds."""
        updated = await self._queue.update_message(
            delivery.message_id,
            pop_receipt=delivery.pop_receipt,
            visibility_timeout=visibility_timeout,
        )
        delivery.pop_receipt = updated.pop_receipt or delivery.pop_receipt

    async def release(self, delivery: Delivery, *, delay_s: int = 0) -> None:
        """Make the message visible again after ``delay_s`` (0: at once) for another worker."""
        await self.extend(delivery, visibility_timeout=max(0, delay_s))

    async def delete(self, delivery: Delivery) -> None:
        try:
            await self._queue.delete_message(delivery.message_id, delivery.pop_receipt)
        except azure_errors.ResourceNotFoundError:
            logger.warning("message %s was already deleted", delivery.message_id)

    async def poison(
        self,
        delivery: Delivery,
        *,
        reason: str,
        job_id: str | None,
        original_blob: str | None = None,
    ) -> None:
        """Move a message to the poison queue with its reason, then delete the original.

        A message longer than ``contract.POISON_INLINE_LIMIT`` must have been saved whole in
        ``original_blob`` first (the poison message then carries only its beginning)."""
        text = contract.poison_message(
            reason=reason,
            original=delivery.content,
            job_id=job_id,
            attempts=delivery.dequeue_count,
            original_blob=original_blob,
        )
        await self._poison.send_message(text, time_to_live=-1)
        await self.delete(delivery)

    async def depth(self) -> int:
        """Approximate message count (includes in-flight messages)."""
        properties = await self._queue.get_queue_properties()
        return int(properties.approximate_message_count or 0)

    async def poison_depth(self) -> int:
        try:
            properties = await self._poison.get_queue_properties()
        except azure_errors.ResourceNotFoundError:
            return 0
        return int(properties.approximate_message_count or 0)

    async def peek_poison(self, *, max_messages: int = 32) -> list[str]:
        messages = await self._poison.peek_messages(max_messages=max_messages)
        return [str(message.content) for message in messages]
