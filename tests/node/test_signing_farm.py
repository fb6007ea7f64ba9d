"""The operator's sizing of a farm that signs everything, on the real node: the chart's operator
runs a ReportPool with a signing key (a ``kubernetes.io/tls`` Secret) and the image's EN 16931
rules; a burst then a steady stream of signed PDF/A-3 Factur-X e-invoices with a visible stamp,
and before it the same shape printed plain by a pool of the same spec without the key.

Asserted: every job stored once (none lost, failed or interrupted), and the jobs' CPU reached
the policy (the status's ``lastDecision.browserCpu`` rose above the spec's ``browser.cpu`` on the
signing side only, which ran fewer browsers a pod). The queue waits (p50/p95 against the target), the
decisions over time and the pod-seconds are printed and written as figures, never asserted.
``REPORTFARM_SIGNING_FARM_SHAPE`` (``BURST,RATE,SECONDS``; default ``40,2,30``) sets the burst,
the stream's jobs per second and its length for a measurement; ``REPORTFARM_SIGNING_FARM_FIGURES``
a file for the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.finishing import keys
from tests.harness.polling import eventually
from tests.node import farm, images, release, signing
from tests.node import node as node_harness

pytestmark = pytest.mark.timeout(1800)

TARGET_WAIT_S = 10.0
SHAPE = signing.Shape.parse(os.environ.get("REPORTFARM_SIGNING_FARM_SHAPE", "40,2,30"))


def _signing_secret(tools: farm.Tools, folder: Path) -> keys.Pki:
    pki = keys.Pki.make()
    pki.write(folder)
    tools.kubectl(
        "create", "secret", "generic", signing.SIGNING_SECRET, "-n", release.NAMESPACE,
        "--type=kubernetes.io/tls", *[f"--from-file={folder / n}" for n in
                                      ("tls.crt", "tls.key", "ca.crt")],
    )  # fmt: skip
    return pki


def _run_side(tools: farm.Tools, node: node_harness.Node, connection: str, image: str, *,
              signed: bool) -> tuple[signing.Side, list[str], list[dict[str, Any]]]:  # fmt: skip
    name = "einvoices" if signed else "prints"
    side = signing.Side(kind="signed e-invoice" if signed else "plain print")
    tools.apply(signing.pool(name, image, signing=signed, target_wait_s=TARGET_WAIT_S))
    selector = f"app.kubernetes.io/instance={name}"

    def ready() -> bool:
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for p in tools.running_pods(release.NAMESPACE, selector)
            for c in p["status"].get("conditions", [])
        )

    eventually(f"a {name} pod Ready", ready, timeout=240, detail=node.logs)
    started_mono, started = time.monotonic(), time.time()
    sample = signing.sampler(tools, name, started_mono)
    ids = asyncio.run(
        signing.drive(connection, name, SHAPE, signed=signed, sample=sample, samples=side.samples)
    )

    def done() -> bool:
        side.samples.append(sample())
        outcome = asyncio.run(farm.collect(connection, name, release.CONTAINER, ids, timeout=0))
        return outcome.missing == 0

    eventually(f"the {name} jobs to end", done, timeout=900, every=3.0, detail=node.logs)
    side.samples.append(sample())
    asyncio.run(
        signing.results(connection, name, ids, side, started=started, burst=SHAPE.burst, timeout=60)
    )
    events = tools.get(
        "events", "-n", release.NAMESPACE, "--field-selector",
        f"involvedObject.kind=ReportPool,involvedObject.name={name}",
    )["items"]  # fmt: skip
    said = [f"{e.get('reason')}: {e.get('message')}" for e in events]
    tools.kubectl("delete", "reportpool", "-n", release.NAMESPACE, name, "--wait=true")
    eventually(f"the {name} pods gone", lambda: not tools.get(
        "pods", "-n", release.NAMESPACE, "-l", selector)["items"], timeout=180)  # fmt: skip
    return side, ids, said


def test_the_operator_sizes_a_farm_that_signs_everything(
    cluster: tuple[farm.Tools, node_harness.Node, str],
    built_images: dict[str, images.Image],
    tmp_path: Path,
) -> None:
    tools, node, connection = cluster
    image = built_images["renderer"].ref
    pki = _signing_secret(tools, tmp_path / "key")
    load = {"before": os.getloadavg()}
    plain, _, plain_events = _run_side(tools, node, connection, image, signed=False)
    load["between"] = os.getloadavg()
    signed, ids, signed_events = _run_side(tools, node, connection, image, signed=True)
    load["after"] = os.getloadavg()

    figures = {
        "shape": {
            "burst": SHAPE.burst,
            "rate per s": SHAPE.rate,
            "seconds": SHAPE.seconds,
            "target wait s": TARGET_WAIT_S,
        },
        "load (1, 5, 15 min)": {k: [round(v, 2) for v in f] for k, f in load.items()},
        "plain": plain.figures(target_wait_s=TARGET_WAIT_S, first_sample_at=0.0),
        "signed": signed.figures(target_wait_s=TARGET_WAIT_S, first_sample_at=0.0),
        "plain samples": plain.samples,
        "signed samples": signed.samples,
        "plain events": plain_events,
        "signed events": signed_events,
    }
    text = json.dumps(figures, indent=1)
    print(text)
    (tmp_path / "figures.json").write_text(text)
    out = os.environ.get("REPORTFARM_SIGNING_FARM_FIGURES")
    if out:
        Path(out).write_text(text)

    for side in (plain, signed):
        assert side.succeeded == side.jobs == SHAPE.burst + round(SHAPE.rate * SHAPE.seconds)
        assert (side.failed, side.interrupted, side.lost) == (0, 0, 0), figures
    # The jobs' CPU reached the policy: the signing pool sized its browsers by it, not the plain.
    assert figures["signed"]["finish cpu s (last)"], figures
    assert figures["signed"]["peak browser cpu"] > signing.BROWSER_CPU, figures
    assert figures["plain"]["peak browser cpu"] <= signing.BROWSER_CPU + 1e-9, figures
    # Fewer browsers a pod where each job needs more CPU. Pods are not asserted: a signing pod
    # is ready once its finishing processes are up, and one such pod may hold the shape alone.
    signed_bpp, plain_bpp = (figures[s]["peak browsers per pod"] for s in ("signed", "plain"))
    assert signed_bpp < plain_bpp, figures

    # What was stored is what a recipient needs: signed, PDF/A-3 Factur-X with its XML.
    pdf = asyncio.run(signing.one_output(connection, "einvoices", ids[-1], tmp_path))
    status = keys.validate(pdf.read_bytes(), pki)
    assert status.bottom_line, status.pretty_print_details()
    attached = subprocess.run(["pdfdetach", "-list", str(pdf)], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    assert "factur-x.xml" in attached, attached
