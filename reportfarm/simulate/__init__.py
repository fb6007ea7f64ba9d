"""
A discrete-time simulator of the render farm: replays an arrival trace through our scaling policy
and through a KEDA + HPA baseline, on the same simulated cluster, and compares them.

Layers (lower never imports higher): ``traces`` and ``workload`` (what arrives), ``farm`` (the
simulated pods, browsers and queue), ``ours`` and ``baseline`` (who scales the farm), ``running``
(the clock), ``metrics``, ``scoring`` (the issue's bar over seeds), ``frontier`` (knob sweeps),
``reporting`` and ``plotting`` (what we learn), ``cli`` (the command).
"""
