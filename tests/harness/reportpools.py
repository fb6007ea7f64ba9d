"""A small ReportPool for the e2e tests: cheap pods, fast windows, inline templates."""

from __future__ import annotations

from typing import Any

GROUP, VERSION, PLURAL = "reportfarm.io", "v1alpha1", "reportpools"


def report_pool(name: str, queue_name: str, /, **spec: Any) -> dict[str, Any]:
    """The manifest; keyword arguments replace top-level spec fields (``queue`` too)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ReportPool",
        "metadata": {"name": name},
        "spec": {
            "queue": {"name": queue_name, "connectionSecretRef": {"name": "storage"}},
            "image": "reportfarm/renderer:test",
            "templates": {"inline": {"hello.html": "<h1>{{ name }}</h1>"}},
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"cpu": "2", "memory": "2Gi"},
            },
            "browser": {"cpu": "500m", "memory": "512Mi"},
            "replicas": {"min": 0, "max": 4},
            "browsersPerPod": {"min": 1, "max": 4},
            "target": {"queueWaitSeconds": 5},
            "scaleDown": {"stabilizationSeconds": 5},
            "scaleToZero": {"idleSeconds": 10},
            **spec,
        },
    }
