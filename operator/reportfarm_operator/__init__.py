"""The reportfarm operator: ReportPool custom resources -> autoscaled renderer Deployments.

Layers, lower ones never importing higher ones:

- ``settings``, ``specs`` (a spec in plain units), ``k8s`` (the API adapter), ``observing``
  (queue depth, renderers' load, pool resize), ``reporting`` (status, conditions, Events),
  ``children`` (pure manifest builders);
- ``reconciling`` (children match the spec), ``scaling`` (one loop iteration), ``metrics``;
- ``runtime`` (long-lived resources), ``handlers`` (kopf decorators only), ``main`` (the command).

Run it with ``reportfarm operator`` (``reportfarm_operator.main.main``).
"""
