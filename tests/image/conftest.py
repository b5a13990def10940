"""The image tests use the real-API-server fixtures of tests/k8s (a control plane with kai's RBAC).

They live outside tests/k8s so that the run on the oldest Kubernetes release (`make test`'s second
pass over tests/k8s) does not build and start the image a second time: the image does not change
with the API server's release.
"""

from tests.k8s.conftest import binaries  # noqa: F401
from tests.k8s.sched import admin, nodes, ns, scheduler_cluster  # noqa: F401
