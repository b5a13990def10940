"""The GPU-group labels a shared pod carries: written, recognised and read back as one rule."""

from __future__ import annotations

from kai.api import constants as C
from kai.api.gpugroups import gpu_group_labels, has_gpu_group_label, is_gpu_group_label


def test_the_labels_written_are_the_labels_recognised() -> None:
    for groups in (("g1",), ("g1", "g2", "g3")):
        labels = gpu_group_labels(groups)
        assert labels and all(is_gpu_group_label(k) for k in labels)
        assert has_gpu_group_label(labels)
        assert has_gpu_group_label({"app": "x", **labels})


def test_other_labels_are_not_gpu_group_labels() -> None:
    near = {"app": "x", C.LABEL_GPU_GROUP + "-other": "y", "x/" + C.LABEL_GPU_GROUP: "z"}
    assert not any(is_gpu_group_label(k) for k in near)
    assert not has_gpu_group_label(near)
    assert not has_gpu_group_label({})
