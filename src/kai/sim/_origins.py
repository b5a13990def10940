"""Where each object of the embedded cluster came from, so that an error names what the user wrote.

A manifest's object is known by its file. An object a controller made (a RayCluster's pods) is known by
its owner and the owner's field it was built from; an error about it (a pod's resources) is moved to that
field of the owner, in the owner's file, up the chain of owners (``relocate``).
"""

from __future__ import annotations

import dataclasses

from kai.api.errors import ManifestError
from kai.api.objects import ApiObject, object_ref
from kai.api.workloads import Workload
from kai.podgrouper import Origin
from kai.store import Key, key_of

SimObject = ApiObject | Workload
ObjKey = tuple[str, Key]  # (kind, (namespace, name))
MAX_OWNER_CHAIN = 16  # owners walked up from an object (real chains are 1-3 deep)


def ref_of(obj: SimObject) -> str:
    return object_ref(obj.kind, obj.meta.namespace, obj.meta.name)


def _parse_ref(ref: str) -> ObjKey:
    kind, _, rest = ref.partition("/")
    ns, _, name = rest.rpartition("/")
    return kind, (ns, name)


def remap(field: str, maps: tuple[str, str]) -> str | None:
    """A field of a made object → the field of its owner it was built from (None if not from there)."""
    child, owner = maps
    if child:
        if not (field == child or field.startswith((child + ".", child + "["))):
            return None
        rest = field[len(child) :]
    else:
        rest = "." + field if field else ""
    return (owner + rest) if owner else rest.lstrip(".")


@dataclasses.dataclass(frozen=True, slots=True)
class Made:
    """Provenance of an object a controller created: which owner, and from which of its fields."""

    owner: ObjKey
    maps: tuple[str, str]


class Origins:
    """Each object's file, and for made objects their owner and field (see the module docstring)."""

    def __init__(self) -> None:
        self._sources: dict[ObjKey, str] = {}
        self._made: dict[ObjKey, Made] = {}

    def record(self, obj: SimObject, source: str) -> None:
        self._sources[(obj.kind, key_of(obj))] = source

    def record_made(self, obj: SimObject, owner: SimObject, maps: tuple[str, str]) -> None:
        self._made[(obj.kind, key_of(obj))] = Made((owner.kind, key_of(owner)), maps)

    def same_source(self, obj: SimObject, like: ObjKey) -> None:
        """*obj* is reported in the file of the object *like* (a generated PodGroup: its top owner's)."""
        self._sources[(obj.kind, key_of(obj))] = self._sources.get(like, "")

    def source(self, obj: SimObject) -> str:
        return self._sources.get((obj.kind, key_of(obj)), "")

    def error(self, obj: SimObject, field: str, message: str) -> ManifestError:
        return self.relocate(ManifestError(message, obj=ref_of(obj), field=field))

    def error_at(self, origin: Origin, message: str) -> ManifestError:
        return self.relocate(ManifestError(message, obj=origin.ref, field=origin.field))

    def relocate(self, err: ManifestError) -> ManifestError:
        """Point an error about an object a controller made at what the user wrote: the owner's field the
        object was built from (a pod's resources → the RayCluster's template), and the owner's file."""
        key = _parse_ref(err.obj) if err.obj else None
        obj, field = err.obj, err.field
        while key is not None and key in self._made:
            made = self._made[key]
            mapped = remap(field, made.maps) if field else None
            if mapped is None:
                break
            field, key = mapped, made.owner
            obj = object_ref(key[0], key[1][0], key[1][1])
        source = err.source or (self._sources.get(key, "") if key is not None else "")
        return ManifestError(err.message, source=source, obj=obj, field=field)
