"""The documentation site's generated pages, built from their sources of truth (the CRD's schema,
the gateway's OpenAPI document, the alert rules) when mkdocs builds the site (``mkdocs_hooks.py``
at the root hands off to these), so the site cannot drift from the code.
"""
