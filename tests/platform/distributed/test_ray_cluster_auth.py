"""The cluster YAMLs (ray_cluster/): no MLflow server without authentication or on every
interface, Ray token authentication in every ``ray start``, the secrets synced; and
``start_mlflow.sh`` really starting MLflow's basic-auth app (401 without the user, 200 with it)."""
import base64
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.platform.distributed.ray_head import free_port

CLUSTER = ROOT / "ray_cluster"
YAMLS = sorted(CLUSTER.glob("*.yaml"))
COMMAND_KEYS = ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
                "head_start_ray_commands", "worker_start_ray_commands")
EVERY_INTERFACE = re.compile(r"--host[= ]+(0\.0\.0\.0|::|\[::\]|\*)(\s|$)")


def shell_lines(text: str) -> list[str]:
    """Commands of a shell script: comments dropped, backslash continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def commands_of(config: dict) -> list[str]:
    """Every command a cluster YAML runs on its nodes, with the lines of the repository scripts
    they call (``ray_cluster/NAME.sh``) in place."""
    out = []
    for key in COMMAND_KEYS:
        for command in config.get(key) or []:
            out.append(command)
            for script in re.findall(r"ray_cluster/([\w.-]+\.sh)", command):
                out += shell_lines((CLUSTER / script).read_text())
    return out


def test_there_are_cluster_yamls():
    assert {p.name for p in YAMLS} >= {"aws.yaml", "onprem.yaml", "runtime_env.yaml"}


@pytest.mark.parametrize("path", [p for p in YAMLS if p.name != "runtime_env.yaml"], ids=lambda p: p.name)
def test_mlflow_behind_basic_auth_on_a_private_address_and_ray_token_auth(path):
    config = yaml.safe_load(path.read_text())
    commands = commands_of(config)
    servers = [c for c in commands if re.search(r"\bmlflow server\b", c)]
    assert servers, "the head's MLflow server is started"
    for command in servers:
        assert "--app-name basic-auth" in command, command
        assert not EVERY_INTERFACE.search(command), command
    starts = [c for c in commands if re.search(r"\bray start\b", c)]
    assert len(starts) == 2  # head and worker
    for command in starts:
        assert re.search(r"RAY_AUTH_MODE=token\b.*\bray start\b", command, re.S), command
    assert not any("RAY_AUTH_MODE=disabled" in c for c in commands)
    head = next(c for c in starts if "--head" in c)
    assert "--dashboard-host=127.0.0.1" in head
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    assert config["file_mounts"]["~/.mlflow/credentials"] == "~/.mlflow/credentials"
    assert any("RAY_AUTH_MODE=token" in c and ".bashrc" in c for c in config["setup_commands"])
    assert any(re.search(r"pip install .*mlflow\[auth\]", c) for c in config["head_setup_commands"])


def test_no_mlflow_server_on_every_interface_anywhere_in_ray_cluster():
    for path in CLUSTER.iterdir():
        if path.suffix in (".yaml", ".sh", ".md"):
            for line in shell_lines(path.read_text()) if path.suffix == ".sh" else path.read_text().splitlines():
                if "mlflow server" in line:
                    assert not EVERY_INTERFACE.search(line), f"{path.name}: {line}"


def fake_home(tmp_path: Path, credentials: bool = True) -> dict:
    home = tmp_path / "home"
    (home / ".mlflow").mkdir(parents=True)
    if credentials:
        (home / ".mlflow" / "credentials").write_text(
            "[mlflow]\nmlflow_tracking_username = alice\nmlflow_tracking_password = s3cret-password-42\n")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    return {"home": home, "stubs": stubs}


def stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)


def run_script(home: Path, stubs: Path, port: int) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(stubs), str(Path(sys.executable).parent), os.environ["PATH"]])  # venv: mlflow
    env = dict(os.environ, HOME=str(home), PATH=path)
    return subprocess.run(["bash", str(CLUSTER / "start_mlflow.sh"), str(port)], env=env, capture_output=True,
                          text=True, timeout=60, start_new_session=True)


def test_start_mlflow_passes_auth_and_the_private_address(tmp_path):
    paths = fake_home(tmp_path)
    record = tmp_path / "record"
    stub(paths["stubs"], "hostname", 'echo "10.1.2.3 172.17.0.1 "\n')
    stub(paths["stubs"], "mlflow", f'echo "$@" > {record}.tmp\n'
                                   f'env | grep -E "^MLFLOW_(AUTH_|FLASK)" | sed "s/KEY=.*/KEY=set/" | sort >> {record}.tmp\nmv {record}.tmp {record}\n')
    out = run_script(paths["home"], paths["stubs"], 5123)
    assert out.returncode == 0, out.stderr
    deadline = time.time() + 20
    while not record.exists() and time.time() < deadline:
        time.sleep(0.1)
    state = paths["home"] / "mlflow"
    assert record.read_text().splitlines() == [
        f"server --app-name basic-auth --host 10.1.2.3 --port 5123 --backend-store-uri sqlite:///{state}/mlruns.db "
        f"--artifacts-destination {state}/artifacts",
        "MLFLOW_AUTH_ADMIN_PASSWORD=s3cret-password-42", "MLFLOW_AUTH_ADMIN_USERNAME=alice",
        f"MLFLOW_AUTH_CONFIG_PATH={CLUSTER}/mlflow_auth.ini", "MLFLOW_FLASK_SERVER_SECRET_KEY=set"]
    assert len((state / "secret_key").read_text().strip()) == 64 and (state / "secret_key").stat().st_mode & 0o077 == 0
    assert "s3cret-password-42" not in out.stdout + out.stderr


def test_start_mlflow_refuses_without_credentials_or_with_a_short_password(tmp_path):
    paths = fake_home(tmp_path, credentials=False)
    stub(paths["stubs"], "mlflow", "exit 0\n")
    out = run_script(paths["home"], paths["stubs"], 5124)
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert f"start_mlflow.sh: {paths['home']}/.mlflow/credentials not found" in out.stderr
    (paths["home"] / ".mlflow" / "credentials").write_text(
        "[mlflow]\nmlflow_tracking_username = alice\nmlflow_tracking_password = short\n")
    out = run_script(paths["home"], paths["stubs"], 5124)
    assert out.returncode == 1 and "shorter than 12 characters" in out.stderr
    assert not (paths["home"] / "mlflow" / "server.pid").exists()


def get(url: str, user: str = "", password: str = "") -> int:
    request = urllib.request.Request(url)
    if user:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_started_mlflow_server_refuses_requests_without_the_user(tmp_path):
    pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs mlflow[auth] (Flask-WTF): the cluster "
                                            "YAMLs install it on the head; this environment lacks it")
    paths = fake_home(tmp_path)
    stub(paths["stubs"], "hostname", 'echo "127.0.0.1"\n')  # here: loopback stands for the private address
    port = free_port()
    out = run_script(paths["home"], paths["stubs"], port)
    assert out.returncode == 0, out.stderr
    pid = int((paths["home"] / "mlflow" / "server.pid").read_text())
    url = f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=1"
    try:
        deadline, status = time.time() + 120, None
        while time.time() < deadline and Path(f"/proc/{pid}").exists():
            try:
                status = get(url)
                break
            except OSError:
                time.sleep(0.5)
        assert status == 401, (paths["home"] / "mlflow" / "server.log").read_text()[-2000:]
        assert get(url, "alice", "wrong") == 401
        assert get(url, "alice", "s3cret-password-42") == 200
    finally:
        stop_group(pid)


def stop_group(pid: int) -> None:
    """The server's process group (the script ran in a session of its own: this server only)."""
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return
    os.killpg(group, signal.SIGTERM)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(group, signal.SIGKILL)
