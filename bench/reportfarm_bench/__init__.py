"""The parts of ``reportfarm bench`` (the entry point is :mod:`reportfarm_renderer.bench`), and
``reportfarm bench-lanes`` (:mod:`.lanes`: interactive latency idle vs beside a bulk batch).

- :mod:`.documents`: the example reports, rendered to HTML once.
- :mod:`.measuring`: the closed loop that drives a strategy, percentiles, PDF checks.
- :mod:`.strategies`: the ways to print a PDF, side by side in one process.
- :mod:`.printing`: the print path's variants for ``reportfarm bench-print`` (pool shapes,
  Chromium flags, loading) against today's, with CPU time and memory per PDF.
- :mod:`.end_to_end`: the whole path through the queue (Azurite) and an in-process renderer.
- :mod:`.reporting`: the table, the JSON and the plot.

``reportfarm bench-gotenberg`` (:mod:`reportfarm_renderer.bench_gotenberg`) adds:

- :mod:`.gotenberg`: Gotenberg started in its own PID namespace (once per Chromium it is given:
  ours, and Debian's full one as its image runs it), its configuration, its client.
- :mod:`.footprint`: the PSS of whole process trees, sampled while a side prints.
- :mod:`.sameness`: each Gotenberg side's PDF of a document has the same pages and text as ours.
- :mod:`.versus`: its report, table and plot.
"""
