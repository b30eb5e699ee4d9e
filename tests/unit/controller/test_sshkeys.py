"""The SSH Secret's name: derived from the job's uid, the same every time, different for
another job, and in the alphabet and length a generateName would get."""

from __future__ import annotations

import re

import pytest

from kubetrain.controller.sshkeys import ssh_secret_name


def test_the_name_is_the_same_for_a_uid_and_differs_between_uids() -> None:
    first = ssh_secret_name("job-ssh-", "6f1c2a7e-0000-4000-8000-000000000001")
    assert first == ssh_secret_name("job-ssh-", "6f1c2a7e-0000-4000-8000-000000000001")
    assert re.fullmatch(r"job-ssh-[bcdfghjklmnpqrstvwxz2456789]{5}", first)
    names = {ssh_secret_name("job-ssh-", f"uid-{i}") for i in range(200)}
    assert len(names) == 200  # 27**5 = 14 million names


def test_a_job_without_a_uid_gets_no_name() -> None:
    with pytest.raises(ValueError, match="the job has no uid yet"):
        ssh_secret_name("job-ssh-", "")
