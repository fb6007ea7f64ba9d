"""The gateway's OpenAPI 3 document, written by hand next to the handlers it describes.

A property-based test (schemathesis) sends generated requests built from it to the real gateway
and checks every answer against it, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from typing import Any

from reportfarm import contract, finishing
from reportfarm_gateway import parsing, tenancy

_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_BATCH_ID = tenancy.NAME_PATTERN
_TEMPLATE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_LENGTH = r"^\d+(\.\d+)?(px|in|cm|mm)?$"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str, **headers: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }
    if headers:
        response["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in headers.items()
        }
    return response


def _error(description: str, **headers: str) -> dict[str, Any]:
    return _json(_ref("Error"), description, **headers)


_TOO_LARGE = (
    f"The body is over the farm's limit of {contract.MAX_DATA_BYTES // 2**20} MiB (or the "
    "gateway's lower setting); a Content-Length past it is refused before the body is read."
)


def _bad_request(description: str) -> dict[str, Any]:
    """A 400: JSON, from the handlers and from the HTTP parser (a request line or header past
    its size limit: reportfarm_gateway.protocol)."""
    return _error(description)


_PDF_RESPONSE: dict[str, Any] = {
    "description": "The PDF.",
    "content": {"application/pdf": {"schema": {"type": "string", "format": "binary"}}},
}
_COMMON_ERRORS = {
    "401": _error("No bearer token of a tenant.", **{"WWW-Authenticate": "Bearer realm."}),
    "429": _error("The tenant's rate or in-flight limit.", **{"Retry-After": "Seconds."}),
}


def _finish_schemas() -> dict[str, Any]:
    """What a job may ask of its PDF after the print (reportfarm.finishing), as schemas."""
    text = {"type": "string", "minLength": 1, "maxLength": finishing.MAX_TEXT}
    short = {"type": "string", "minLength": 1, "maxLength": 200}
    file_name = {"type": "string", "pattern": finishing.FILE_NAME_PATTERN, "maxLength": 100}
    flag = {"type": "boolean"}

    def number(low: float, high: float) -> dict[str, Any]:
        return {"type": "number", "minimum": low, "maximum": high}

    def strict(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": False, "properties": properties, **more}

    return {
        "Files": {
            "type": "object",
            "minProperties": 1,
            "description": (
                "The job's files, name (1-100 of [A-Za-z0-9._-]) -> content in base64; "
                "finish.attachments and finish.facturx name them by that name."
            ),
            "additionalProperties": {"type": "string", "format": "byte"},
        },
        "Finish": strict(
            {
                "metadata": strict(
                    {
                        "title": text,
                        "author": text,
                        "subject": text,
                        "keywords": {"type": "array", "maxItems": 50, "items": short},
                        "language": {"type": "string", "pattern": finishing.LANGUAGE_PATTERN},
                        "created": {
                            "type": "string",
                            "description": "ISO 8601 with a time zone.",
                        },
                    }
                ),
                "pdfa": {"type": "string", "enum": list(finishing.PDFA_LEVELS)},
                "attachments": {
                    "type": "array",
                    "maxItems": finishing.MAX_ATTACHMENTS,
                    "items": strict(
                        {
                            "blob": {
                                "type": "string",
                                "description": "A name in files, or attachments/<job id>/<name>.",
                            },
                            "name": file_name,
                            "mime": {"type": "string", "pattern": finishing.MIME_PATTERN},
                            "description": text,
                            "relationship": {
                                "type": "string",
                                "enum": list(finishing.RELATIONSHIPS),
                            },
                        },
                        required=["blob"],
                    ),
                },
                "facturx": strict(
                    {
                        "xml_blob": {"type": "string"},
                        "level": {"type": "string", "enum": list(finishing.FACTURX_LEVELS)},
                    },
                    required=["xml_blob"],
                ),
                "sign": strict(
                    {
                        "visible": flag,
                        "page": {"type": "integer", "minimum": -1},
                        "box": {
                            "type": "array",
                            "minItems": 4,
                            "maxItems": 4,
                            "items": number(0, 14400),
                        },
                        "reason": short,
                        "location": short,
                        "contact": short,
                    }
                ),
                "watermark": strict(
                    {
                        "text": {"type": "string", "minLength": 1, "maxLength": 60},
                        "opacity": number(0.02, 1),
                        "color": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"},
                        "angle": number(-90, 90),
                        "font_size_pt": number(6, 400),
                    },
                    required=["text"],
                ),
                "permissions": strict(
                    {"print": flag, "copy": flag, "modify": flag, "annotate": flag}
                ),
            },
            description=(
                "What the PDF must be when it leaves: metadata, PDF/A, attached files, "
                "Factur-X, a signature by the farm's key, a watermark, permissions "
                "(docs/finishing/index.md)."
            ),
        ),
    }


_NULLABLE_NUMBER = {"type": "number", "nullable": True}
_NULLABLE_STRING = {"type": "string", "nullable": True}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}},
    },
    "PdfOptions": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "format": {
                "type": "string",
                "nullable": True,
                "enum": [
                    "Letter",
                    "Legal",
                    "Tabloid",
                    "Ledger",
                    "A0",
                    "A1",
                    "A2",
                    "A3",
                    "A4",
                    "A5",
                    "A6",
                    None,
                ],
            },
            "width": {"type": "string", "nullable": True, "pattern": _LENGTH},
            "height": {"type": "string", "nullable": True, "pattern": _LENGTH},
            **{
                f"margin_{side}": {"type": "string", "pattern": _LENGTH}
                for side in ("top", "right", "bottom", "left")
            },
            "landscape": {"type": "boolean"},
            "scale": {"type": "number", "minimum": 0.1, "maximum": 2},
            "print_background": {"type": "boolean"},
            "display_header_footer": {"type": "boolean"},
            "header_template": {"type": "string", "maxLength": 16384},
            "footer_template": {"type": "string", "maxLength": 16384},
            "prefer_css_page_size": {"type": "boolean"},
            "tagged": {
                "type": "boolean",
                "description": "A tagged PDF (headings, tables, lists) for screen readers.",
            },
            "outline": {"type": "boolean", "description": "Bookmarks from the headings."},
        },
    },
    **_finish_schemas(),
    "ReportRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["template", "data"],
        "properties": {
            "template": {"type": "string", "pattern": _TEMPLATE},
            "data": {"type": "object"},
            "wait_s": {
                "type": "number",
                "minimum": 0,
                "description": "Seconds to wait for the PDF (capped by the gateway's maximum).",
            },
            "pdf": _ref("PdfOptions"),
            "callback_url": {"type": "string", "maxLength": 2048, "format": "uri"},
            "finish": _ref("Finish"),
            "files": _ref("Files"),
        },
    },
    "ReportStatus": {
        "type": "object",
        "required": ["job_id", "state", "links"],
        "properties": {
            "job_id": {"type": "string"},
            "state": {"type": "string", "enum": ["pending", "succeeded", "failed"]},
            "error": _NULLABLE_STRING,
            "attempts": {"type": "integer"},
            "batch_id": _NULLABLE_STRING,
            "item_index": {"type": "integer", "nullable": True},
            "submitted_at": _NULLABLE_NUMBER,
            "finished_at": _NULLABLE_NUMBER,
            "seconds": _NULLABLE_NUMBER,
            "stages_ms": {"type": "object", "additionalProperties": {"type": "number"}},
            "links": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "BatchItem": {
        "type": "object",
        "description": (
            '{"template"?, "data": {...}, "pdf"?, "finish"?, "files"?}; or, with the template '
            "query parameter, a bare data object."
        ),
    },
    "BatchSubmitted": {
        "type": "object",
        "required": ["batch_id", "count", "created", "sent", "links"],
        "properties": {
            "batch_id": {"type": "string"},
            "count": {"type": "integer"},
            "created": {"type": "boolean"},
            "sent": {"type": "integer"},
            "links": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "FailedItem": {
        "type": "object",
        "required": ["index", "job_id", "error", "attempts"],
        "properties": {
            "index": {"type": "integer"},
            "job_id": {"type": "string"},
            "error": {"type": "string"},
            "attempts": {"type": "integer"},
        },
    },
    "BatchStatus": {
        "type": "object",
        "required": ["batch_id", "state", "total", "succeeded", "failed", "running"],
        "properties": {
            "batch_id": {"type": "string"},
            "state": {
                "type": "string",
                "enum": ["RUNNING", "COMPLETED", "PARTIAL_FAILED", "FAILED"],
            },
            "total": {"type": "integer"},
            "succeeded": {"type": "integer"},
            "failed": {"type": "integer"},
            "running": {"type": "integer"},
            "retries": {"type": "integer"},
            "failed_items": {"type": "array", "items": _ref("FailedItem")},
            "failed_items_truncated": {"type": "boolean"},
            "p50_s": _NULLABLE_NUMBER,
            "p95_s": _NULLABLE_NUMBER,
            "tenant": _NULLABLE_STRING,
            "links": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "BatchRetried": {
        "type": "object",
        "required": ["batch_id", "retried", "count"],
        "properties": {
            "batch_id": {"type": "string"},
            "retried": {"type": "array", "items": {"type": "integer"}},
            "count": {"type": "integer"},
        },
    },
}


def _path_param(name: str, pattern: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": pattern},
    }


def _report_paths() -> dict[str, Any]:
    job_id = _path_param("job_id", _ID)
    status = _json(_ref("ReportStatus"), "The job's state.")
    pdf_answers = {
        "200": _PDF_RESPONSE,
        "404": _error("No such report of this tenant."),
        "409": _error("Not ready (pending, with Retry-After) or failed.", **{"Retry-After": "s"}),
        **_COMMON_ERRORS,
    }
    return {
        "/v1/reports": {
            "post": {
                "summary": "Render one report now (interactive lane), waiting up to wait_s.",
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "maxLength": 256},
                        "description": (
                            "The same key (per tenant) with the same body sends nothing new; "
                            "with another body it is a 422."
                        ),
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("ReportRequest")}},
                },
                "responses": {
                    "200": _PDF_RESPONSE,
                    "202": _json(
                        _ref("ReportStatus"),
                        "Not ready within wait_s: poll Location.",
                        Location="The status URL.",
                        **{"Retry-After": "Seconds."},
                    ),
                    "400": _bad_request(
                        "Not a valid report request (strict JSON: no NaN or Infinity, "
                        f"nesting at most {parsing.MAX_DEPTH} deep)."
                    ),
                    "413": _error(_TOO_LARGE),
                    "422": _json(
                        {"anyOf": [_ref("ReportStatus"), _ref("Error")]},
                        "The job failed within wait_s (its status); or the Idempotency-Key was "
                        "used with another body (an error).",
                    ),
                    **_BODY_ERRORS,
                    "503": _error(
                        "The interactive lane is full, or the gateway is reading too many "
                        "large bodies.",
                        **{"Retry-After": "Seconds."},
                    ),
                    **_COMMON_ERRORS,
                },
            }
        },
        "/v1/reports/{job_id}": {
            "get": {
                "summary": "A report's state (format=pdf: its PDF).",
                "parameters": [
                    job_id,
                    {
                        "name": "format",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["json", "pdf"]},
                    },
                ],
                "responses": {
                    **pdf_answers,
                    "200": {
                        "description": "The state as JSON, or the PDF with format=pdf.",
                        "content": {**status["content"], **_PDF_RESPONSE["content"]},
                    },
                },
            }
        },
        "/v1/reports/{job_id}/pdf": {
            "get": {"summary": "A report's PDF.", "parameters": [job_id], "responses": pdf_answers}
        },
    }


_BODY_ERRORS = {
    "408": _error("The body did not arrive within the read deadline."),
    "415": _error("A Content-Type this call does not take (or a charset other than UTF-8)."),
}


def _batch_paths() -> dict[str, Any]:
    batch_id = _path_param("batch_id", _BATCH_ID)
    not_found = _error("No such batch of this tenant.")
    items = {"type": "array", "minItems": 1, "items": _ref("BatchItem")}
    return {
        "/v1/batches": {
            "post": {
                "summary": "Submit a batch (bulk lane): one job per item, the first item first.",
                "parameters": [
                    {
                        "name": "batch_id",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "pattern": _BATCH_ID},
                    },
                    {
                        "name": "template",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "pattern": _TEMPLATE},
                    },
                    {
                        "name": "callback_url",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "format": "uri", "maxLength": 2048},
                    },
                    {
                        "name": "item_webhooks",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["true", "false", "1", "0"]},
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": items},
                        "application/x-ndjson": {
                            "schema": {**items, "description": "JSON Lines: one item a line."}
                        },
                    },
                },
                "responses": {
                    "200": _json(
                        _ref("BatchSubmitted"),
                        "The batch existed already.",
                        Location="The batch's status URL.",
                    ),
                    "202": _json(
                        _ref("BatchSubmitted"),
                        "Accepted: every item is queued.",
                        Location="The batch's status URL.",
                    ),
                    "400": _bad_request(
                        "Not a valid batch (strict JSON: no NaN or Infinity, nesting at most "
                        f"{parsing.MAX_DEPTH} deep)."
                    ),
                    "409": _error("This tenant's batch id is taken by other items."),
                    **_BODY_ERRORS,
                    "413": _error(f"Too many items, or {_TOO_LARGE[0].lower()}{_TOO_LARGE[1:]}"),
                    "503": _error(
                        "The bulk lane is full, or the gateway is reading too many large bodies.",
                        **{"Retry-After": "Seconds."},
                    ),
                    **_COMMON_ERRORS,
                },
            }
        },
        "/v1/batches/{batch_id}": {
            "get": {
                "summary": "Counts, state and failed items with reasons.",
                "parameters": [batch_id],
                "responses": {
                    "200": _json(_ref("BatchStatus"), "The batch's state."),
                    "404": not_found,
                    **_COMMON_ERRORS,
                },
            }
        },
        "/v1/batches/{batch_id}/retry": {
            "post": {
                "summary": "Resubmit the failed items only.",
                "parameters": [batch_id],
                "responses": {
                    "200": _json(_ref("BatchRetried"), "Nothing had failed."),
                    "202": _json(
                        _ref("BatchRetried"),
                        "The failed items are queued again.",
                        Location="The batch's status URL.",
                    ),
                    "404": not_found,
                    "503": _error("The bulk lane is full.", **{"Retry-After": "Seconds."}),
                    **_COMMON_ERRORS,
                },
            }
        },
        "/v1/batches/{batch_id}/pdf": {
            "get": {
                "summary": "The succeeded items' PDFs merged into one, in item order.",
                "parameters": [batch_id],
                "responses": {
                    "200": _PDF_RESPONSE,
                    "404": not_found,
                    "409": _error(
                        "Still running, or no item succeeded.", **{"Retry-After": "Seconds."}
                    ),
                    "413": _error("Too many items to merge."),
                    **_COMMON_ERRORS,
                },
            }
        },
    }


def _service_paths() -> dict[str, Any]:
    anyone: list[dict[str, list[str]]] = []
    state = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
    return {
        "/healthz": {
            "get": {
                "summary": "Alive.",
                "security": anyone,
                "responses": {"200": _json(state, "Alive.")},
            }
        },
        "/readyz": {
            "get": {
                "summary": "Storage and dispatcher reachable.",
                "security": anyone,
                "responses": {
                    "200": _json(state, "Ready."),
                    "503": _json(state, "Not ready, with the reasons."),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics.",
                "security": anyone,
                "responses": {
                    "200": {
                        "description": "Prometheus text.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document.",
                "security": anyone,
                "responses": {"200": _json({"type": "object"}, "OpenAPI 3.")},
            }
        },
    }


_QUERY_REFUSAL = (
    "A query parameter this call does not take, one given twice, or a value outside its schema."
)


def _with_query_refusals(paths: dict[str, Any]) -> dict[str, Any]:
    """Every /v1 call answers 400 to a query string it does not take (reportfarm_gateway.queries);
    where the call has a 400 of its own, its description says so too."""
    for path, operations in paths.items():
        if not path.startswith("/v1/"):
            continue
        for operation in operations.values():
            responses = operation["responses"]
            if "400" in responses:
                responses["400"]["description"] += (
                    f" Or: {_QUERY_REFUSAL[0].lower()}{_QUERY_REFUSAL[1:]}"
                )
            else:
                responses["400"] = _bad_request(_QUERY_REFUSAL)
    return paths


def document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "reportfarm gateway",
            "version": "1",
            "description": (
                "HTML-to-PDF reports: one now (interactive lane) or many as a batch (bulk lane). "
                "Every /v1 call needs a tenant's bearer token."
            ),
        },
        "security": [{"bearerAuth": []}],
        "paths": _with_query_refusals({**_report_paths(), **_batch_paths(), **_service_paths()}),
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": _SCHEMAS,
        },
    }
