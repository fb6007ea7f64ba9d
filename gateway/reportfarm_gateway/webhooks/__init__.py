"""Webhooks: job and batch completion POSTed to the caller's URL, signed, at least once.

- :mod:`.signing`: HMAC-SHA256 over ``<timestamp>.<body>``, and the receiver's check.
- :mod:`.settings`: secrets per tenant, retry bounds, the network policy for callback URLs.
- :mod:`.delivering`: one POST through the network policy, and its line in the delivery log.
- :mod:`.dispatching`: the loop over the ``<queue>-events`` queue; a failed delivery goes back to
  the queue with a visibility delay (the queue is the retry timer: nothing lives only in memory).
"""
