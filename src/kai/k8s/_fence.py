"""Fencing: a replica writes only while it holds the Lease, with margin, for the term it started under.

Theory of operation:

* The LeaderElector ``grant``s the Fence a term (the Lease's ``leaseTransitions`` when this replica
  took it: it grows with every change of holder, so two holders never share one) and a deadline:
  the monotonic time the last successful renewal was *sent*, plus the renew deadline. Another replica
  may take the Lease only once it has seen the record unchanged for the lease duration, counted from
  after that renewal reached the API server; so the deadline leaves ``lease_duration - renew_deadline``
  (5 s by default) for writes already on the wire.
* The Fence is ``revoke``d the moment the elector reads another holder in the Lease, or fails to renew
  before the deadline; and it lapses by itself at the deadline, even if nothing runs to notice (a
  process frozen by SIGSTOP finds its Fence closed when it thaws).
* Every write goes through a ``FencedApi`` made for one term: the check runs just before the request's
  bytes are written (``Api.request``'s gate; no await in between). A refused write raises ``Fenced``,
  which is not an ApiError: callers stop instead of retrying or reporting a failed bind. Waiting less
  for the answer of a write already sent would not help: it is on its way whatever the client does.
* Without leader election the Fence is always open (``Fence.open_always``): one replica by contract.

Limits (docs/cluster.md, "Failure modes"): Kubernetes has no fencing tokens on writes, so a request
that passed the check can still reach the API server late if the network holds it longer than the
margin; and a process frozen between the check and the write (a window of a few instructions) sends
its write when it thaws.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from kai.k8s._api import Api

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Fenced(Exception):
    """A write refused: this replica does not hold the Lease for the write's term (any more)."""


class Fence:
    """Whether this replica may write now, and for which term."""

    def __init__(self) -> None:
        self.term = -1  # the current term; -1: never held
        self._valid_until = 0.0  # monotonic; writes stop here unless renewed
        self._always = False

    @classmethod
    def open_always(cls) -> Fence:
        """No leader election: a single replica writes whenever it likes (term 0)."""
        f = cls()
        f._always = True
        f.term = 0
        return f

    def grant(self, term: int, valid_until: float) -> None:
        """The Lease is held for *term* until monotonic *valid_until* (called on acquire and on renew)."""
        self.term = term
        self._valid_until = valid_until

    def revoke(self) -> None:
        """The Lease is lost: no write from now on, whatever its term."""
        self._valid_until = 0.0
        self._always = False

    def current(self) -> int | None:
        """The term writes may be made under now, or None."""
        return self.term if self.remaining() > 0 else None

    def remaining(self) -> float:
        """Seconds writes stay allowed (inf without leader election, 0 when fenced)."""
        if self._always:
            return float("inf")
        return max(0.0, self._valid_until - time.monotonic())

    def check(self, term: int) -> None:
        """Raise Fenced unless writes are allowed now for *term*."""
        if term != self.term or self.remaining() <= 0:
            raise Fenced(f"writes of term {term} refused: the Lease is not held (term {self.term})")

    def api(self, api: Api, term: int) -> FencedApi:
        return FencedApi(api, self, term)


class FencedApi:
    """An Api whose writes are checked against the Fence for one term (reads pass through)."""

    def __init__(self, api: Api, fence: Fence, term: int) -> None:
        self.inner = api
        self.fence = fence
        self.term = term

    def gate(self) -> None:
        self.fence.check(self.term)

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        if method in WRITES:
            self.gate()  # before waiting for a connection slot, and again just before the bytes go out
            kw["gate"] = self.gate
        return await self.inner.request(method, path, **kw)

    async def get_raw(self, path: str, params: dict[str, str] | None = None) -> bytes:
        return await self.inner.get_raw(path, params)

    def stream_lines(self, path: str, params: dict[str, str], read_timeout: float, **kw: Any) -> AsyncIterator[bytes]:
        return self.inner.stream_lines(path, params, read_timeout, **kw)
