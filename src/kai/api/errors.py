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
        return ManifestError(
            self.message,
            source=self.source or (source or ""),
            obj=self.obj or (obj or ""),
            field=self.field,
        )
