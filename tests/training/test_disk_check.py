"""A full disk before a checkpoint is one clear error, written nowhere half, and the run goes on once space is
freed (issue 44, item 3): a real trainer job whose run directory is on a small tmpfs made for the test."""

import subprocess

import pytest

from training.disk_check import CHECKPOINT_BYTES_PER_PARAM, DiskFullError, check_room, checkpoint_need


def test_the_need_is_the_last_checkpoints_size_or_twelve_bytes_a_parameter(tmp_path):
    out = tmp_path / "checkpoints" / "solver"
    assert checkpoint_need(out, 1000) == int(1000 * CHECKPOINT_BYTES_PER_PARAM * 1.1)
    (out / "checkpoint-5").mkdir(parents=True)
    (out / "checkpoint-5" / "optimizer.pt").write_bytes(b"x" * 5000)
    assert checkpoint_need(out, 1000) == 5500
    with pytest.raises(
        DiskFullError, match=r"not enough disk for the next checkpoint in .*sesa train --resume"
    ):
        check_room(out, 2**62)
    check_room(out, 1)


@pytest.fixture
def small_disk(tmp_path):
    """A 40 MiB tmpfs: the tiny policy's checkpoint (about 80 MB) does not fit, its run directory does."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mount)], check=False)
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_trainer_without_room_for_its_checkpoint_stops_with_one_line_and_resumes_once_freed(
    tmp_path, small_disk
):
    from tests.training.trainer_harness import (
        commit_step,
        coordinator,
        finish,
        make_run,
        start_job,
        tiny_policy,
        wait_until,
    )

    model = tiny_policy(tmp_path / "policy")  # beside the small disk, not on it
    run = make_run(small_disk, "full", model, steps=1)
    coord = coordinator(run)
    job = start_job(run, "solver", coord)
    try:
        wait_until(lambda: coord.ready("solver", 0), 300, "step 0's publish")
        commit_step(run, 0, "solver", model, coord)
        job.wait(300)
        trouble = coord.trainer_trouble() or ""
    finally:
        if job.poll() is None:
            job.kill()
        coord.close()
    assert job.returncode != 0
    assert "not enough disk for the next checkpoint in" in trouble and "GiB free" in trouble, trouble
    assert "Traceback" not in trouble
    assert not list((run / "checkpoints" / "solver").glob("checkpoint-*"))  # nothing half written
    # space freed: the same run directory's trainer takes step 0 again and finishes
    subprocess.run(["mount", "-o", "remount,size=400m", str(small_disk)], check=True)
    coord = coordinator(run)
    job = start_job(run, "solver", coord)
    try:
        wait_until(lambda: coord.ready("solver", 0), 300, "step 0's publish after the resume")
        commit_step(run, 0, "solver", model, coord)
        finish(job, run, "solver")
    finally:
        if job.poll() is None:
            job.kill()
        coord.close()
    assert (run / "policies" / "solver" / ".complete").exists()
    assert list((run / "checkpoints" / "solver").glob("checkpoint-*"))
