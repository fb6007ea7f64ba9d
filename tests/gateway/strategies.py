"""Hypothesis strategies for request bodies: JSON of any shape, reports with fields right and
wrong, and fragments that have broken parsers before. Shared by the tests that generate bodies."""

from __future__ import annotations

import json

from hypothesis import strategies as st

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
reports = st.fixed_dictionaries(
    {
        "template": st.sampled_from(["plain", "nosuch", ""]),
        "data": st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    },
    optional={
        "wait_s": json_values | st.sampled_from([0, 0.1]),
        "pdf": json_values,
        "finish": json_values,
        "files": json_values,
        "callback_url": json_values,
        "extra": json_values,
    },
)
FRAGMENTS = [
    b"[" * 300,
    b"[" * 201 + b'"' + b'\\"' * 2000,
    b'{"a": 1, "a": 2}',
    b'{"template": "plain", "data": {"x": "\\ud800"}}',
    b'{"template": "plain", "data": {}, "wait_s": 1' + b"0" * 400 + b"}",
    b"NaN",
    b'{"template": "plain", "data": {"n": 1e999}}',
    b"\xff\xfe{}",
    b'{"template": "plain", "data": {}}\n{"x": ',
]
bodies = st.one_of(
    reports.map(lambda value: json.dumps(value).encode()),
    st.lists(reports, min_size=1, max_size=3).map(lambda items: json.dumps(items).encode()),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.sampled_from(FRAGMENTS),
    st.binary(max_size=200),
)
