"""One ReportPool and what kube tests read of it, through the plain client (not the operator's
adapter): its status and conditions, its Deployment, pods and Events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes
from reportfarm_operator import specs

from reportfarm import policy
from tests.harness import polling, reportpools

GROUP, VERSION, PLURAL = reportpools.GROUP, reportpools.VERSION, reportpools.PLURAL


class Pool:
    def __init__(
        self,
        api: kubernetes.client.ApiClient,
        namespace: str,
        name: str,
        *,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.apps: Any = kubernetes.client.AppsV1Api(api)
        self.core: Any = kubernetes.client.CoreV1Api(api)
        self.custom: Any = kubernetes.client.CustomObjectsApi(api)
        self.namespace, self.name = namespace, name
        self.defaults = dict(defaults or {})
        """Spec fields of :meth:`create` unless given (over ``reportpools.report_pool``'s)."""

    def create(self, queue: str, connection: str, **spec: Any) -> dict[str, Any]:
        """The pool and its Secret ``storage`` (shared by the pools of a namespace)."""
        try:
            self.core.create_namespaced_secret(
                self.namespace,
                {"metadata": {"name": "storage"}, "stringData": {"connection-string": connection}},
            )
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise
        body = reportpools.report_pool(self.name, queue, **{**self.defaults, **spec})
        return self.create_body(body)

    def create_body(self, body: dict[str, Any]) -> dict[str, Any]:
        def created() -> dict[str, Any] | None:
            try:
                return dict(
                    self.custom.create_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, PLURAL, body
                    )
                )
            except kubernetes.client.ApiException as error:
                if error.status != 404:  # just after Established: not served for a moment
                    raise
                return None

        return polling.eventually("the ReportPool resource to be served", created, timeout=30)

    def find(self) -> dict[str, Any] | None:
        """The pool, or None once it is deleted."""
        try:
            return self.get()
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def get(self) -> dict[str, Any]:
        return dict(
            self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, self.name
            )
        )

    def status(self) -> dict[str, Any]:
        return dict((self.find() or {}).get("status") or {})

    def condition(self, kind: str) -> dict[str, Any]:
        found = {c["type"]: c for c in self.status().get("conditions") or []}
        return dict(found.get(kind) or {})

    def decided_at(self) -> float | None:
        """When the last decision was taken (the policy's own clock, kept in the status)."""
        return (self.status().get("policy") or {}).get("decidedAt")

    def deployment(self) -> Any:
        """The renderers' Deployment, or None."""
        try:
            return self.apps.read_namespaced_deployment(f"{self.name}-renderer", self.namespace)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def wake_replicas(self, depth: int) -> int:
        """The pods the policy wakes this pool to for ``depth`` queued jobs (no pod yet): kube
        tests check that the operator applies the policy; the sizes are the policy's unit tests'."""
        seen = policy.Observation(
            now=0.0, queue_depth=depth, ready_replicas=0, browsers_per_pod=0, busy_browsers=0
        )
        return policy.decide(seen, specs.pool_spec(self.get()["spec"]), policy.State()).replicas

    def replicas(self) -> int | None:
        """The Deployment's spec.replicas (None before it exists)."""
        deployment = self.deployment()
        return None if deployment is None else int(deployment.spec.replicas or 0)

    def pods(self) -> list[Any]:
        selector = f"reportfarm.io/pool={self.name}"
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def events(self) -> list[Any]:
        return list(
            self.core.list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.name={self.name}"
            ).items
        )

    def event_reasons(self) -> set[str]:
        return {event.reason for event in self.events()}
