"""The error every bad input turns into: which file, which object, which field."""

from __future__ import annotations


class ManifestError(ValueError):
    """Bad user input, reported with its place so a user can fix it.

    ``str(err)`` reads like ``cluster.yaml: Queue/team-a: spec.resources.gpu.quota: 'x' is not a number``.
    """

    def __init__(self, message: str, *, source: str = "", obj: str = "", field: str = "") -> None:
        self.source = source
        self.obj = obj
        self.field = field
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [p for p in (self.source, self.obj, self.field) if p]
        return ": ".join([*parts, self.message])

    def located(self, *, source: str | None = None, obj: str | None = None) -> ManifestError:
        """The same error with the file and/or object filled in where they were unknown."""
        return type(self)(
            self.message,
            source=self.source or (source or ""),
            obj=self.obj or (obj or ""),
            field=self.field,
        )


class OwnerSpecError(ManifestError):
    """An owner's spec that contradicts itself: a count out of range (negative replicas, a segment size
    larger than the group), two fields that disagree (minReplicas > replicas or > maxReplicas), a pod routed
    to a subgroup the spec does not have. Each value is well-formed, so the owner was accepted; the
    pod-grouper cannot honour what it says. Unlike other ManifestErrors this one is not fatal: the
    pods are grouped by the default rule (one PodGroup, minMember 1) and the caller reports a Warning on
    the owner naming the field, so nothing the user applied is dropped.
    """
