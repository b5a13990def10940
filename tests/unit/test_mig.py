"""kai.api.mig: MIG profile names as KAI reads them, and legacy MIG pods (instances named in annotations)."""

from __future__ import annotations

from kai.api.mig import legacy_mig_request, mig_gpus, requests_mig


def test_a_profile_counts_as_its_gpu_slices() -> None:
    assert mig_gpus("nvidia.com/mig-1g.10gb") == 1
    assert mig_gpus("nvidia.com/mig-3g.40gb") == 3
    assert mig_gpus("nvidia.com/gpu") is None
    assert mig_gpus("nvidia.com/mig-1g") is None  # not a profile KAI parses


def test_legacy_request_reads_integer_annotations_only() -> None:
    ann = {"pod-group-name": "pg", "nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "two"}
    assert legacy_mig_request(ann) == {"nvidia.com/mig-1g.10gb": 2}  # KAI skips a value that is not an integer
    assert legacy_mig_request({"pod-group-name": "pg"}) == {}


def test_requests_mig() -> None:
    assert requests_mig({"cpu": 1000, "nvidia.com/mig-1g.10gb": 1})
    assert not requests_mig({"cpu": 1000, "nvidia.com/gpu": 1})
