"""Pod lifetimes: kai.sim/duration from the bind, restart from scratch, resume from a checkpoint."""

from __future__ import annotations

import pytest

from kai.sim.lifetimes import Lifetimes

JOB = ("ns", "train")


def pod(i: int) -> tuple[str, str, str]:
    return ("ns", f"train-{i}", f"uid-{i}")


def test_a_pod_finishes_its_duration_after_its_bind() -> None:
    life = Lifetimes()
    life.start(pod(0), JOB, now=100.0, duration=50.0)
    life.start(pod(1), JOB, now=100.0, duration=None)  # runs until something stops it
    assert life.next_finish() == 150.0
    assert life.due(149.9) == []
    assert life.due(150.0) == [pod(0)]
    assert life.due(10_000.0) == []  # each due pod once; the endless one never
    assert life.complete(pod(0)) == 150.0
    assert life.next_finish() is None


def test_without_checkpoint_an_interrupted_pod_loses_its_work() -> None:
    life = Lifetimes()
    life.start(pod(0), JOB, now=0.0, duration=3600.0, gpus=4)
    lost = life.interrupt(pod(0), now=1800.0)
    assert lost is not None
    assert (lost.ran, lost.kept, lost.lost, lost.gpus) == (1800.0, 0.0, 1800.0, 4)
    life.start(pod(2), JOB, now=2000.0, duration=3600.0)  # the replacement starts from scratch
    assert life.finish(pod(2)) == 5600.0
    assert life.next_finish() == 5600.0  # the interrupted pod's heap entry is stale and skipped


def test_with_checkpoint_the_replacement_resumes_from_the_last_whole_checkpoint() -> None:
    life = Lifetimes()
    life.start(pod(0), JOB, now=0.0, duration=3600.0, checkpoint=600.0)
    lost = life.interrupt(pod(0), now=1700.0)  # checkpoints at 600 and 1200: 1200 s kept, 500 s lost
    assert lost is not None
    assert (lost.kept, lost.lost) == (1200.0, 500.0)
    life.start(pod(1), JOB, now=2000.0, duration=3600.0, checkpoint=600.0)
    assert life.finish(pod(1)) == 2000.0 + 2400.0
    lost = life.interrupt(pod(1), now=2000.0 + 700.0)  # progress 1900: the 1800 checkpoint is new
    assert lost is not None
    assert (lost.kept, lost.lost) == (600.0, 100.0)
    life.start(pod(2), JOB, now=3000.0, duration=3600.0, checkpoint=600.0)
    assert life.finish(pod(2)) == 3000.0 + 1800.0


def test_progress_of_a_forgotten_job_is_not_handed_to_a_later_job_of_the_same_name() -> None:
    life = Lifetimes()
    life.start(pod(0), JOB, now=0.0, duration=100.0, checkpoint=10.0)
    life.interrupt(pod(0), now=55.0)
    life.forget_job(JOB)
    life.start(pod(1), JOB, now=60.0, duration=100.0, checkpoint=10.0)
    assert life.finish(pod(1)) == pytest.approx(160.0)
