"""The Kubernetes side of kai: installing its API objects and, in ``envtest``, a real
control plane (etcd + kube-apiserver, optionally kube-controller-manager and
kube-scheduler) for tests and benchmarks.

Rules: nothing under ``kai.scheduler`` imports this package; the engine stays pure and
the Kubernetes backend feeds it through the Store.
"""
