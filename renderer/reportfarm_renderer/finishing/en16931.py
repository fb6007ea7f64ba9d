"""EN 16931's business rules on a Factur-X invoice's XML, in production: the CEN schematron for
CII compiled to XSLT (CEN's eInvoicing-EN16931 project; the image takes it from Mustang's jar on
Maven Central, ``scripts/en16931/install.sh`` does the same here), run by saxonche (Saxon-HE,
XSLT 3.0, no JVM). The XSD says an invoice is well-formed; the rules say it adds up and holds
together (BR-CO-15: the total with VAT is the total without VAT plus the VAT), which is what
receivers check and reject on.

Applied to the profiles that are EN 16931 invoices (``basic``, ``en16931``, ``extended``);
``minimum`` and ``basicwl`` are not (no lines), and the rules do not apply to them. A failed rule
of flag ``fatal`` fails the job with the rule's id and text; warnings are logged.

The stylesheet is compiled once per process (~0.8 s, with the first invoice), then an invoice is
checked in ~40 ms. Saxon's processor is not shared between threads: one check at a time.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
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


def failures(xml: bytes, xslt: Path) -> list[Failure]:
    """Every rule of ``xslt`` (an SVRL-producing schematron) that ``xml`` breaks."""
    with _LOCK:
        processor, executable = _compiled(xslt)
        document = processor.parse_xml(xml_text=xml.decode("utf-8"))
        report = executable.transform_to_string(xdm_node=document)
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
