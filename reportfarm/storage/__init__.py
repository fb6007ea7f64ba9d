"""Adapters at the edge: the queue and the blob store, reached through small typed wrappers."""
