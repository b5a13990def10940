"""``kai.api.copying.replace``: ``dataclasses.replace`` for the pods each cycle lays over, without ``__init__``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest

from kai.api.copying import replace
from kai.api.objects import ObjectMeta, Pod, PodGroup


def every_field_set(cls: type) -> Any:
    """An instance of *cls* whose every field holds an object of its own (told apart by identity)."""
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):
        setattr(obj, f.name, object())
    return obj


@pytest.mark.parametrize("cls", [Pod, ObjectMeta, PodGroup])
def test_every_field_is_copied_and_the_change_is_set_on_the_copy_only(cls: type) -> None:
    original = every_field_set(cls)
    before = {f.name: getattr(original, f.name) for f in dataclasses.fields(cls)}
    changed = dataclasses.fields(cls)[0].name
    new = object()
    copy = replace(original, **{changed: new})
    assert type(copy) is cls and copy is not original
    for name, value in before.items():
        assert getattr(original, name) is value  # the original is untouched
        assert getattr(copy, name) is (new if name == changed else value)


def test_it_gives_what_dataclasses_replace_gives() -> None:
    pod = Pod(meta=ObjectMeta("p", "ns", "u", labels={"a": "b"}), requests={"cpu": 1000}, node_name="")
    assert replace(pod, node_name="n1") == dataclasses.replace(pod, node_name="n1")
    meta = replace(pod.meta, annotations={"x": "y"})
    assert meta == dataclasses.replace(pod.meta, annotations={"x": "y"}) and pod.meta.annotations == {}


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(AttributeError):
        replace(Pod(meta=ObjectMeta("p", "ns", "u"), requests={}), no_such_field=1)


def test_classes_a_copy_would_change_are_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Frozen:
        a: int

    @dataclass(slots=True)
    class Derived:
        a: int

        def __post_init__(self) -> None:
            self.a += 1

    @dataclass
    class NoSlots:
        a: int

    for obj in (Frozen(1), Derived(1), NoSlots(1)):
        with pytest.raises(TypeError):
            replace(obj, a=2)
