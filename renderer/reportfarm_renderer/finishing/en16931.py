"""EN 16931's business rules on a Factur-X invoice's XML, in production: the CEN schematron for
CII compiled to XSLT (CEN's eInvoicing-EN16931 project; the image takes it from Mustang's jar on
Maven Central, ``scripts/en16931/install.sh`` does the same here), run by saxonche (Saxon-HE,
XSLT 3.0, no JVM). The XSD says an invoice is well-formed; the rules say it adds up and holds
together (BR-CO-15: the total with VAT is the total without VAT plus the VAT), which is what
receivers check and reject on.

Applied to the profiles that are EN 16931 invoices (``basic``, ``en16931``, ``extended``);
``minimum`` and ``basicwl`` are not (no lines), and the rules do not apply to them. A failed rule
of flag ``fatal`` fails the job with the rule's id and text; warnings are logged.

Saxon runs in a process of its own (one, spawned with the first invoice, kept for the next):
saxonche is a GraalVM native image, and loaded into the renderer's process it left that process
unable to print afterwards (a later print hung, or the process exited 0 in the middle of it;
seen in ``reportfarm bench finish``). The stylesheet is compiled once there (~0.8 s), then an
invoice is checked in ~40 ms plus the hand-over. One check at a time.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import multiprocessing
import threading
from pathlib import Path
from typing import Any

from lxml import etree

from reportfarm.finishing import FinishError

logger = logging.getLogger(__name__)

CHECKED_LEVELS = frozenset({"basic", "en16931", "extended"})
SVRL = "{http://purl.oclc.org/dsdl/svrl}"
_LOCK = threading.Lock()
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)


@dataclasses.dataclass(frozen=True)
class Failure:
    rule: str
    flag: str
    text: str
    location: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.text}"


@functools.cache
def _compiled(xslt: Path) -> tuple[Any, Any]:
    from saxonche import PySaxonProcessor

    processor = PySaxonProcessor(license=False)
    compiler = processor.new_xslt30_processor()
    try:
        executable = compiler.compile_stylesheet(stylesheet_file=str(xslt))
    except Exception as error:  # a missing or broken stylesheet: the farm's mistake, said plainly
        raise FinishError(f"cannot compile EN 16931's rules {xslt}: {error}") from None
    return processor, executable


def _transform(xml: str, xslt: str) -> tuple[bool, str]:
    """In Saxon's process: (True, the SVRL report) or (False, why it could not run)."""
    try:
        processor, executable = _compiled(Path(xslt))
        document = processor.parse_xml(xml_text=xml)
        return True, str(executable.transform_to_string(xdm_node=document))
    except FinishError as error:
        return False, error.description
    except Exception as error:  # Saxon's own errors do not cross a process boundary whole
        return False, f"EN 16931's rules could not run: {type(error).__name__}: {error}"


def _prepare(xslt: str) -> tuple[bool, str]:
    """In Saxon's process: compile ``xslt`` now; (True, "") or (False, why it could not)."""
    try:
        _compiled(Path(xslt))
    except FinishError as error:
        return False, error.description
    return True, ""


_SAXON: concurrent.futures.ProcessPoolExecutor | None = None


def _saxon() -> concurrent.futures.ProcessPoolExecutor:
    """Saxon's process (started when first asked for); call with ``_LOCK`` held."""
    global _SAXON
    if _SAXON is None:
        spawn = multiprocessing.get_context("spawn")
        _SAXON = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn)
    return _SAXON


def warm(xslt: Path) -> concurrent.futures.Future[tuple[bool, str]]:
    """Start Saxon's process and compile ``xslt`` there, without waiting: the first invoice then
    finds it ready (or waits for this, in line) instead of paying the spawn and the compile
    (~0.5-0.8 s of CPU, several seconds of wall time on a pod whose CPU is busy printing and
    starting). The future says (False, why) when the stylesheet cannot be compiled; the first
    invoice's check says it again."""
    with _LOCK:
        return _saxon().submit(_prepare, str(xslt))


def _report(xml: bytes, xslt: Path) -> str:
    global _SAXON
    with _LOCK:
        try:
            ok, text = _saxon().submit(_transform, xml.decode("utf-8"), str(xslt)).result()
        except concurrent.futures.process.BrokenProcessPool:
            _SAXON = None  # the next invoice starts a new one
            raise FinishError("EN 16931's rules: the checking process died") from None
    if not ok:
        raise FinishError(text)
    return text


def failures(xml: bytes, xslt: Path) -> list[Failure]:
    """Every rule of ``xslt`` (an SVRL-producing schematron) that ``xml`` breaks."""
    report = _report(xml, xslt)
    root = etree.fromstring(report.encode("utf-8"), _XML)
    found = []
    for failed in root.iter(f"{SVRL}failed-assert", f"{SVRL}successful-report"):
        message = failed.find(f"{SVRL}text")
        text = " ".join("".join(message.itertext()).split()) if message is not None else ""
        found.append(
            Failure(
                rule=failed.get("id") or "?",
                flag=failed.get("flag") or "fatal",
                text=text,
                location=failed.get("location") or "",
            )
        )
    return found


def check(xml: bytes, level: str, xslt: Path | None) -> None:
    """FinishError naming every fatal rule ``xml`` breaks (when ``level`` is one they apply to)."""
    if level not in CHECKED_LEVELS:
        return
    if xslt is None:
        raise FinishError(
            "EN 16931's business rules are not installed in this renderer "
            "(REPORTFARM_EN16931_XSLT; the image has them, scripts/en16931/install.sh here)"
        )
    broken = failures(xml, xslt)
    for warning in (failure for failure in broken if failure.flag != "fatal"):
        logger.warning("Factur-X XML: EN 16931 warning %s", warning)
    fatal = [failure for failure in broken if failure.flag == "fatal"]
    if fatal:
        listed = "; ".join(str(failure) for failure in fatal[:5])
        more = f" (and {len(fatal) - 5} more)" if len(fatal) > 5 else ""
        raise FinishError(
            f"the Factur-X XML breaks {len(fatal)} of EN 16931's business rules: {listed}{more}"[
                :1500
            ]
        )
