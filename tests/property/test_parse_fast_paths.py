"""The parsers' fast paths read what their careful paths read.

``parse_tolerations`` and ``_str_map`` take a shortcut for well-formed input (what the API
server sends: strings where strings belong), which builds no field path per entry. Anything else goes the
careful way, which names the field at fault. Each property draws input of every shape, well-formed or not
(numbers, booleans, None, nested values, unknown operators and effects), and checks that the shortcut gives
what the careful path gives: the same value, or a ManifestError naming the same field.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from kai.api._read import _str, _str_map
from kai.api.errors import ManifestError
from kai.api.objects import _parse_tolerations, parse_tolerations

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 70000), st.sampled_from(["", "a", "1", "TCP", "UDP", "Always"])
)
values = st.one_of(scalars, st.lists(scalars, max_size=1), st.dictionaries(st.just("k"), scalars, max_size=1))
words = st.sampled_from(["", "key", "gpu", "Equal", "Exists", "Other", "NoSchedule", "NoExecute", "Bad"])


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("value", fn(*args))
    except ManifestError as e:
        return ("error", e.field, str(e))


tolerations = st.one_of(
    st.none(),
    values,
    st.lists(
        st.one_of(
            values,
            st.fixed_dictionaries(
                {},
                optional={
                    "key": st.one_of(words, scalars),
                    "operator": st.one_of(words, scalars),
                    "value": st.one_of(words, scalars),
                    "effect": st.one_of(words, scalars),
                    "tolerationSeconds": scalars,
                },
            ),
        ),
        max_size=3,
    ),
)


@given(tolerations)
def test_tolerations_fast_path_reads_as_the_careful_one(raw: Any) -> None:
    assert outcome(parse_tolerations, raw) == outcome(_parse_tolerations, raw)


def careful_str_map(obj: Any, path: str) -> dict[str, str]:
    """``_str_map`` as it was before its shortcut."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ManifestError(f"expected a mapping, got {type(obj).__name__}", field=path)
    return {str(k): _str(v, f"{path}.{k}") for k, v in obj.items()}


@example({"": "a", "b": "c"})  # every entry a string: the shortcut
@example({"a": 1})  # the careful path: a number is read as its text
@given(st.one_of(values, st.dictionaries(st.one_of(words, st.integers(0, 3)), st.one_of(words, values), max_size=3)))
def test_str_map_fast_path_reads_as_the_careful_one(obj: Any) -> None:
    assert outcome(_str_map, obj, "metadata.labels") == outcome(careful_str_map, obj, "metadata.labels")
