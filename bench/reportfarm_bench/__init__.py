"""The benchmarks: ``reportfarm bench NAME`` (``reportfarm bench --list``), apart from the services.

A layer of its own above the services (import-linter's contracts in pyproject.toml): it may import
the renderer, the operator, the gateway and the core; nothing imports it but the command line's
``bench`` hook, lazily. No image copies it, so no image installs it.

- :mod:`.commands`: the table of benchmarks; ``reportfarm bench NAME`` runs the module
  ``bench_NAME`` (its ``arguments`` and its ``command``): :mod:`.bench_strategies`,
  :mod:`.bench_gotenberg`, :mod:`.bench_sync`, :mod:`.bench_finish`, :mod:`.bench_print`,
  :mod:`.bench_lanes`, :mod:`.bench_pages`, :mod:`.bench_pod`, :mod:`.bench_einvoice`.

The parts of ``reportfarm bench strategies``, and of ``reportfarm bench lanes`` (:mod:`.lanes`:
interactive latency idle vs beside a bulk batch):

- :mod:`.documents`: the example reports, rendered to HTML once.
- :mod:`.measuring`: the closed loop that drives a strategy, percentiles, PDF checks.
- :mod:`.strategies`: the ways to print a PDF, side by side in one process.
- :mod:`.printing`: the print path's variants for ``reportfarm bench print`` (pool shapes,
  Chromium flags, loading) against today's, with CPU time and memory per PDF.
- :mod:`.end_to_end`: the whole path through the queue (Azurite) and an in-process renderer.
- :mod:`.reporting`: the table, the JSON and the plot.

``reportfarm bench gotenberg`` (:mod:`.bench_gotenberg`) adds:

- :mod:`.gotenberg`: Gotenberg started in its own PID namespace (once per Chromium it is given:
  ours, and Debian's full one as its image runs it), its configuration, its client.
- :mod:`.footprint`: the PSS of whole process trees, sampled while a side prints.
- :mod:`.sameness`: each Gotenberg side's PDF of a document has the same pages and text as ours.
- :mod:`.versus`: its report, table and plot.
- :mod:`.throwaway`: a self-signed certificate, for the stand-in signing key and loopback HTTPS.
"""
