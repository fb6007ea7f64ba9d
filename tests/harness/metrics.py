"""Reading a Prometheus counter family from an in-process registry (the renderer's), across its
labels."""

from __future__ import annotations

from prometheus_client import CollectorRegistry


def by_label(registry: CollectorRegistry, family: str, label: str) -> dict[str, float]:
    """The counter ``family``'s totals keyed by one label's value (summed over the others)."""
    totals: dict[str, float] = {}
    for metric in registry.collect():
        if metric.name != family:
            continue
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                key = sample.labels.get(label, "")
                totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def total(registry: CollectorRegistry, family: str) -> float:
    """The counter ``family``'s total over all its labels."""
    return sum(by_label(registry, family, "").values())
