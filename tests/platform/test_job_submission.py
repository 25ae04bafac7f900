"""``ray.jobs.submit_job`` against a head whose job agent is not up yet: Ray answers "No available
agent to submit job, please try again later" (HTTP 500) while a just-started head's dashboard agent
registers. The submission is tried again for a bounded time, and any other error is not."""
import pytest

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.ray import jobs

NO_AGENT = "Request failed with status code 500: No available agent to submit job, please try again later.."


class FakeClient:
    """Fails its first ``failures`` submissions with ``error``, then accepts."""

    def __init__(self, failures: int, error: str = NO_AGENT):
        self.failures, self.error, self.calls = failures, error, 0

    def submit_job(self, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(self.error)
        return kwargs["submission_id"]


@pytest.fixture
def slept(monkeypatch):
    """The waits asked for, on a clock that only they move (none is taken)."""
    waits = []
    monkeypatch.setattr(jobs.time, "sleep", waits.append)
    monkeypatch.setattr(jobs.time, "monotonic", lambda: float(sum(waits)))
    return waits


def submit(monkeypatch, client):
    monkeypatch.setattr(jobs, "job_client", lambda address: client)
    return jobs.submit_job("http://127.0.0.1:8265", {"seed": 13}, "tiny")


def test_a_head_without_its_job_agent_yet_is_asked_again(monkeypatch, slept):
    client = FakeClient(failures=3)
    sid, created, status = submit(monkeypatch, client)
    assert (created, status, client.calls) == (True, "PENDING", 4) and sid.startswith("multigrain-")
    assert slept == [0.5, 1.0, 2.0]


def test_an_agent_that_never_comes_is_one_error_after_the_wait(monkeypatch, slept):
    monkeypatch.setattr(jobs, "AGENT_WAIT_S", 12.0)
    client = FakeClient(failures=10**6)
    with pytest.raises(ConfigurationError, match="job submission to http://127.0.0.1:8265 failed: .*No available agent"):
        submit(monkeypatch, client)
    assert slept == [0.5, 1.0, 2.0, 4.0] and client.calls == 5  # 7.5 s waited; 5 s more would end past 12


def test_other_errors_are_not_tried_again(monkeypatch, slept):
    client = FakeClient(failures=1, error="Request failed with status code 400: bad runtime_env")
    with pytest.raises(ConfigurationError, match="bad runtime_env"):
        submit(monkeypatch, client)
    assert client.calls == 1 and slept == []
