"""Cluster jobs through the Ray Jobs API: ``multigrain train`` of a resolved spec, submitted
once per spec hash; listing jobs and reading one's status and logs. The runtime env file of a
job is read by ``cluster.load_runtime_env``."""
from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from typing import Optional

from multigrain.platform.errors import ConfigurationError


def auth_headers() -> Optional[dict]:
    """The Ray token as an HTTP header, found where Ray looks (``RAY_AUTH_TOKEN``,
    ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) - the rule ``ray start`` applies: a token
    that exists is used unless ``RAY_AUTH_MODE`` says otherwise (then Ray's client decides)."""
    if os.environ.get("RAY_AUTH_MODE"):
        return None
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if not token:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
        try:
            token = path.read_text().strip()
        except OSError:
            return None
    return {"Authorization": f"Bearer {token}"} if token else None


def jobs_api(address: str):
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address, headers=auth_headers())


def job_client(address: str):
    from ray.exceptions import AuthenticationError

    if not address.startswith(("http://", "https://")):
        raise ConfigurationError(f"--address {address}: the Jobs API address is the head's dashboard URL, "
                                 f"e.g. http://HEAD:8265")
    try:
        return jobs_api(address)
    except AuthenticationError:
        raise ConfigurationError(f"--address {address}: the cluster wants its auth token: put it in "
                                 f"~/.ray/auth_token or RAY_AUTH_TOKEN (see `ray get-auth-token`)") from None
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigurationError(f"--address {address}: cannot reach the Ray Jobs API ({first}); is the head's "
                                 f"dashboard running (ray start --head --include-dashboard=true)?") from None


def submission_id(digest: str) -> str:
    return f"multigrain-{digest[:16]}"


def job_entrypoint(spec: dict, name: str, run_dir: Optional[str] = None, tracking_uri: Optional[str] = None,
                   cwd: Optional[str] = None, include_packages: tuple = ()) -> str:
    """The job's shell command: (``cd`` to ``cwd``,) write the resolved spec - shipped inline as
    ASCII JSON - under ``.multigrain/jobs/``, then ``multigrain train`` it. Relative paths in the
    spec (data, run dir) are relative to that directory: ``cwd``, else the runtime env's
    ``working_dir``, else where the cluster runs job drivers; so are ``include_packages``
    (the user's ``--include-package`` names, never a run directory's: the modules must be there too)."""
    from multigrain.platform.specs import spec_hash

    digest = spec_hash(spec)
    spec_file = f".multigrain/jobs/{name}-{digest[:8]}.json"
    run_dir = run_dir or f"runs/jobs/{name}-{digest[:8]}"
    text = json.dumps(spec, sort_keys=True, ensure_ascii=True)
    train = ["multigrain", "train", spec_file, "-s", run_dir]
    if tracking_uri:
        train += ["--tracking-uri", tracking_uri]
    for package in include_packages:
        train += ["--include-package", package]
    prefix = ""
    if cwd:
        home, _, rest = cwd.partition("/") if cwd.startswith("~") else ("", "", cwd)
        if home not in ("", "~"):
            raise ConfigurationError(f"--cwd {cwd}: only ~/... is expanded; give an absolute path")
        prefix = f"cd {'~/' if home else ''}{shlex.quote(rest) if rest else ''} && "
    return (f"{prefix}mkdir -p .multigrain/jobs && printf '%s' {shlex.quote(text)} > {spec_file} && "
            + " ".join(shlex.quote(a) for a in train))


def _status_text(status) -> str:
    return str(getattr(status, "value", status))


#: seconds a submission waits for a just-started head's job agent ("No available agent to submit job,
#: please try again later": the dashboard answers before its agent has registered)
AGENT_WAIT_S = 60.0


def _submit(client, kwargs: dict, wait: Optional[float] = None) -> None:
    """``client.submit_job(**kwargs)``, tried again (0.5 s, doubling to 5 s apart) while the head has no
    job agent yet, for at most ``wait`` seconds (``AGENT_WAIT_S``); any other error at once."""
    deadline = time.monotonic() + (AGENT_WAIT_S if wait is None else wait)
    delay = 0.5
    while True:
        try:
            return client.submit_job(**kwargs)
        except RuntimeError as e:
            if "No available agent" not in str(e) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 5.0)


def submit_job(address: str, spec: dict, name: str, runtime_env: Optional[dict] = None,
               run_dir: Optional[str] = None, tracking_uri: Optional[str] = None, num_cpus: float = 1,
               num_gpus: float = 0, retry_failed: bool = False, cwd: Optional[str] = None,
               include_packages: tuple = ()) -> tuple[str, bool, str]:
    """Submit ``multigrain train`` of a resolved spec; the submission id is derived from the
    spec hash, so a second submission finds the first job instead of starting another.
    Returns (submission id, whether a job was started now, its status)."""
    from multigrain.platform.specs import spec_hash

    client = job_client(address)
    digest = spec_hash(spec)
    sid = submission_id(digest)
    runtime_env = dict(runtime_env or {})
    runtime_env["env_vars"] = {"MULTIGRAIN_QUIET": "1", **(runtime_env.get("env_vars") or {})}  # no progress bars
    kwargs = dict(entrypoint=job_entrypoint(spec, name, run_dir, tracking_uri, cwd, tuple(include_packages)),
                  submission_id=sid,
                  runtime_env=runtime_env, metadata={"spec_hash": digest, "spec": name},
                  entrypoint_num_cpus=num_cpus, entrypoint_num_gpus=num_gpus or None)
    try:
        _submit(client, kwargs)
        return sid, True, "PENDING"
    except RuntimeError as e:
        if "already exists" not in str(e):
            raise ConfigurationError(f"job submission to {address} failed: {e}") from None
    status = _status_text(client.get_job_status(sid))
    if retry_failed and status in ("FAILED", "STOPPED"):
        client.delete_job(sid)
        _submit(client, kwargs)
        return sid, True, "PENDING"
    return sid, False, status


def wait_for_job(address: str, sid: str, timeout: float = 3600, poll: float = 2.0) -> str:
    client = job_client(address)
    deadline = time.time() + timeout
    while True:
        status = _status_text(client.get_job_status(sid))
        if status in ("SUCCEEDED", "FAILED", "STOPPED") or time.time() > deadline:
            return status
        time.sleep(poll)


def list_jobs(address: str, everything: bool = False) -> list[dict]:
    rows = []
    for job in job_client(address).list_jobs():
        sid = job.submission_id or ""
        if not everything and not sid.startswith("multigrain-"):
            continue
        rows.append({"submission_id": sid, "status": _status_text(job.status), "entrypoint": job.entrypoint,
                     "spec": (job.metadata or {}).get("spec", ""), "message": job.message or "",
                     "start_time": job.start_time, "end_time": job.end_time})
    return sorted(rows, key=lambda r: r["start_time"] or 0)


def job_details(address: str, sid: str, logs: bool = False) -> dict:
    client = job_client(address)
    try:
        info = client.get_job_info(sid)
    except RuntimeError:
        raise ConfigurationError(f"no job {sid!r} at {address} (see `multigrain jobs --address {address}`)") from None
    out = {"submission_id": sid, "status": _status_text(info.status), "message": info.message or "",
           "entrypoint": info.entrypoint, "metadata": info.metadata or {}}
    if logs:
        out["logs"] = client.get_job_logs(sid)
    return out

