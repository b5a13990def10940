"""A real control plane for tests and benchmarks, in the spirit of controller-runtime's envtest.

``Binaries.find()`` locates etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kubectl of the selected release (current by default, ``$KAI_K8S_VERSION=oldest`` for 1.20.2;
$KUBEBUILDER_ASSETS first, then the cache that scripts/control-plane/provision.sh fills);
``ControlPlane`` runs them on loopback; ``create_node`` and ``mark_pod_running`` play the
kubelet's part. Test-only: nothing in the scheduler imports it.
"""

from kai.k8s.envtest._binaries import (
    CURRENT_VERSION,
    K8S_VERSION,
    OLDEST_VERSION,
    Binaries,
    MissingBinaryError,
    cache_dir,
    default_bin_dir,
    release_name,
    selected_version,
)
from kai.k8s.envtest._controlplane import (
    ADMIN_USER,
    SCHEDULER_USER,
    ControlPlane,
    ControlPlaneError,
    free_port,
)
from kai.k8s.envtest._faultproxy import Fault, FaultProxy, Logged, deep_watch_line
from kai.k8s.envtest._objects import (
    GPU_RESOURCE,
    NOT_READY_TAINT,
    create_node,
    mark_pod_running,
    node_manifest,
    node_status,
    running_pod_status,
)

__all__ = [
    "ADMIN_USER",
    "CURRENT_VERSION",
    "GPU_RESOURCE",
    "K8S_VERSION",
    "NOT_READY_TAINT",
    "OLDEST_VERSION",
    "SCHEDULER_USER",
    "Binaries",
    "ControlPlane",
    "ControlPlaneError",
    "Fault",
    "FaultProxy",
    "Logged",
    "MissingBinaryError",
    "cache_dir",
    "create_node",
    "deep_watch_line",
    "default_bin_dir",
    "free_port",
    "mark_pod_running",
    "node_manifest",
    "node_status",
    "release_name",
    "running_pod_status",
    "selected_version",
]
