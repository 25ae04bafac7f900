"""The cluster YAMLs (ray_cluster/): no MLflow server without authentication or off the head's
loopback address (clients come through SSH tunnels: ``mlflow_tunnel.sh``), Ray token
authentication in every ``ray start``, no core dumps, Ray's metrics endpoints on 127.0.0.1, the
secrets synced; and ``start_mlflow.sh`` really starting MLflow's basic-auth app (401 without the
user, 200 with it)."""
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

from tests.conftest import ROOT, alive as alive_of
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
        assert "--host" not in command.replace('--host "$host"', ""), command  # start_mlflow.sh's default
    starts = [c for c in commands if re.search(r"\bray start\b", c)]
    assert len(starts) == 2  # start_own_ray.sh, called for the head and for the workers
    for command in starts:
        assert re.search(r"RAY_AUTH_MODE=token\b.*\bray start\b", command, re.S), command
    assert not any("RAY_AUTH_MODE=disabled" in c for c in commands)
    ray_starts = [c for key in ("head_start_ray_commands", "worker_start_ray_commands") for c in config[key]
                  if "start_own_ray.sh" in c]
    assert len(ray_starts) == 2
    for command in ray_starts:
        assert re.search(r"export RAY_AUTH_MODE=token\b.*start_own_ray\.sh", command, re.S), command
    head = next(c for c in ray_starts if "--head" in c)
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


def run_script(home: Path, stubs: Path, port: int, env: dict | None = None) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(stubs), str(Path(sys.executable).parent), os.environ["PATH"]])  # venv: mlflow
    env = dict(os.environ, HOME=str(home), PATH=path, **(env or {}))
    return subprocess.run(["bash", str(CLUSTER / "start_mlflow.sh"), str(port)], env=env, capture_output=True,
                          text=True, timeout=60, start_new_session=True)


def test_start_mlflow_passes_auth_and_listens_on_loopback_only(tmp_path):
    paths = fake_home(tmp_path)
    record = tmp_path / "record"
    stub(paths["stubs"], "hostname", 'echo "10.1.2.3 172.17.0.1 "\n')  # the private address is not used
    stub(paths["stubs"], "mlflow", f'echo "$@" > {record}.tmp\n'
                                   f'env | grep -E "^MLFLOW_(AUTH_|FLASK)" | sed "s/KEY=.*/KEY=set/" | sort >> {record}.tmp\nmv {record}.tmp {record}\n')
    out = run_script(paths["home"], paths["stubs"], 5123)
    assert out.returncode == 0, out.stderr
    deadline = time.time() + 20
    while not record.exists() and time.time() < deadline:
        time.sleep(0.1)
    state = paths["home"] / "mlflow"
    assert record.read_text().splitlines() == [
        f"server --app-name basic-auth --host 127.0.0.1 --port 5123 --uvicorn-opts --timeout-worker-healthcheck 60 "
        f"--backend-store-uri sqlite:///{state}/mlruns.db "
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


def get(url: str, user: str = "", password: str = "", timeout: float = 10) -> int:
    request = urllib.request.Request(url)
    if user:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie that nobody reaped does not)."""
    return bool(alive_of([pid]))


#: one uvicorn worker (no supervisor health-checking workers that are still importing MLflow on a
#: busy machine: with 4 its 5 s default killed them for ever, see start_mlflow.sh) and no job runner
#: (7 more Python processes importing MLflow at the same time); what is tested is the basic-auth app
LIGHT_SERVER = {"MLFLOW_WORKERS": "1", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
READY_SECONDS = 90


def test_the_started_mlflow_server_refuses_requests_without_the_user(tmp_path):
    pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs mlflow[auth] (Flask-WTF): the cluster "
                                            "YAMLs install it on the head; this environment lacks it")
    paths = fake_home(tmp_path)
    stub(paths["stubs"], "hostname", 'echo "127.0.0.1"\n')  # here: loopback stands for the private address
    port = free_port()
    log, pid_file = paths["home"] / "mlflow" / "server.log", paths["home"] / "mlflow" / "server.pid"

    def start() -> int:
        out = run_script(paths["home"], paths["stubs"], port, LIGHT_SERVER)
        assert out.returncode == 0, out.stderr
        return int(pid_file.read_text())

    started = time.monotonic()
    pid, starts = start(), 1
    url = f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=1"
    try:
        status = None
        while status is None:
            if not alive(pid):  # died at start-up: seen at once (not after the deadline), started once more
                assert starts == 1, f"the server died at start-up twice: {log.read_text()[-2000:]}"
                print(f"the server died {time.monotonic() - started:.1f} s after its start: {log.read_text()[-500:]}")
                pid, starts = start(), 2
            assert time.monotonic() - started < READY_SECONDS, log.read_text()[-2000:]
            try:
                status = get(url, timeout=5)
            except OSError:
                time.sleep(0.3)
        print(f"the server answered {time.monotonic() - started:.1f} s after the first start ({starts} start(s))")
        assert status == 401, log.read_text()[-2000:]
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


# ---------------------------------------------------------------------------- core dumps, metrics, MLflow tunnels
SCRIPTS = sorted(CLUSTER.glob("*.sh"))
CLUSTER_YAMLS = [p for p in YAMLS if p.name != "runtime_env.yaml"]


def test_no_core_dumps_anywhere_in_ray_cluster():
    """A core dump of a Ray process would hold the cluster's token: none is enabled, and every
    start of Ray turns them off."""
    for path in [*YAMLS, *SCRIPTS]:
        lines = shell_lines(path.read_text()) if path.suffix == ".sh" else path.read_text().splitlines()
        for line in lines:
            assert not re.search(r"ulimit\s+(-\w*c\w*\s+unlimited|-c\s*unlimited)", line), f"{path.name}: {line}"
    script = shell_lines((CLUSTER / "start_own_ray.sh").read_text())
    start = next(i for i, line in enumerate(script) if re.search(r"\bray start\b", line))
    assert "ulimit -c 0" in script[:start]
    for path in CLUSTER_YAMLS:
        config = yaml.safe_load(path.read_text())
        for key in ("head_start_ray_commands", "worker_start_ray_commands"):
            for command in config[key]:
                if "start_own_ray.sh" in command:
                    assert re.search(r"ulimit -c 0 &&.*start_own_ray\.sh", command, re.S), command


@pytest.mark.parametrize("path", CLUSTER_YAMLS, ids=lambda p: p.name)
def test_every_ray_start_goes_through_start_own_ray_with_metrics_on_loopback(path):
    config = yaml.safe_load(path.read_text())
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        for command in config[key]:
            assert not re.search(r"\bray (start|stop)\b", command), command  # only through the scripts
            assert not re.search(r"--metrics-export-port|--dashboard-host=(0\.0\.0\.0|::)", command), command
        assert sum("start_own_ray.sh ~/.multigrain/ray.pids" in c for c in config[key]) == 1
        assert config[key][0] == "bash ~/multigrain/ray_cluster/stop_own_ray.sh ~/.multigrain/ray.pids"
    script = (CLUSTER / "start_own_ray.sh").read_text()
    assert 'export MULTIGRAIN_RAY_METRICS_HOST="${MULTIGRAIN_RAY_METRICS_HOST:-127.0.0.1}"' in script
    assert 'export PYTHONPATH="$here/ray_site${PYTHONPATH:+:$PYTHONPATH}"' in script


METRICS_PROBE = r"""
import json, socketserver, wsgiref.simple_server
import prometheus_client, socket
from ray._private import prometheus_exporter
exporter = prometheus_exporter.new_stats_exporter(prometheus_exporter.Options(namespace="ray", port=0, address=""))
server, _ = prometheus_client.start_http_server(0)  # its default address is 0.0.0.0
plain = wsgiref.simple_server.make_server("", 0, lambda environ, start: [])
asked = wsgiref.simple_server.make_server("127.0.0.2", 0, lambda environ, start: [])
listening = {}
for line in open("/proc/net/tcp").read().splitlines()[1:]:  # this process's listening IPv4 sockets among them
    fields = line.split()
    if fields[3] == "0A":
        ip, port = fields[1].split(":")
        listening[int(port, 16)] = socket.inet_ntoa(bytes.fromhex(ip)[::-1])
print(json.dumps({"exporter": listening[exporter.port], "prometheus": list(server.server_address),
                  "plain": list(plain.server_address), "asked": list(asked.server_address),
                  "patched": hasattr(socketserver.TCPServer.server_bind, "multigrain_metrics_host")}))
"""


def test_ray_metrics_servers_bind_the_address_of_multigrain_ray_metrics_host():
    """ray_site/sitecustomize.py, on the PYTHONPATH of every Ray process that start_own_ray.sh starts,
    binds Ray's Prometheus endpoints (an address of "" or 0.0.0.0) to MULTIGRAIN_RAY_METRICS_HOST."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(CLUSTER / "ray_site"), str(ROOT)]),
               MULTIGRAIN_RAY_METRICS_HOST="127.0.0.1")
    out = subprocess.run([sys.executable, "-c", METRICS_PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert found["patched"] and found["exporter"] == "127.0.0.1"  # Ray's --metrics-export-port server
    assert found["prometheus"][0] == "127.0.0.1" and found["plain"][0] == "127.0.0.1"
    assert found["asked"][0] == "127.0.0.2"  # an address asked for is kept
    env["MULTIGRAIN_RAY_METRICS_HOST"] = ""
    probe = ("import socketserver, json; print(json.dumps(hasattr(socketserver.TCPServer.server_bind, "
             "'multigrain_metrics_host')))")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "false"  # unset: nothing changed


@pytest.mark.parametrize("path", CLUSTER_YAMLS, ids=lambda p: p.name)
def test_nodes_reach_mlflow_through_a_tunnel_whose_key_may_only_forward_to_it(path):
    config = yaml.safe_load(path.read_text())
    assert config["file_mounts"]["~/.mlflow/tunnel_key"] == "~/.mlflow/tunnel_key"
    assert any("chmod 600" in c and "~/.mlflow/tunnel_key" in c for c in config["setup_commands"])
    assert "bash ~/multigrain/ray_cluster/mlflow_tunnel.sh --authorize ~/.mlflow/tunnel_key.pub 5000" in \
        config["head_setup_commands"]
    assert config["worker_start_ray_commands"][-1] == (
        "bash ~/multigrain/ray_cluster/mlflow_tunnel.sh --background ~/.multigrain/mlflow_tunnel.pid "
        "-i ~/.mlflow/tunnel_key $RAY_HEAD_IP 5000")
    assert any("start_mlflow.sh 5000" in c for c in config["head_start_ray_commands"])
    readme = (CLUSTER / "README.md").read_text()
    assert "mlflow_tunnel.sh" in readme and "ssh-keygen" in readme


def tunnel(home: Path, stubs: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(home), PATH=os.pathsep.join([str(stubs), os.environ["PATH"]]))
    return subprocess.run(["bash", str(CLUSTER / "mlflow_tunnel.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=60, start_new_session=True)


def test_mlflow_tunnel_forwards_loopback_to_the_heads_loopback(tmp_path):
    paths = fake_home(tmp_path)
    record = tmp_path / "ssh_args"
    stub(paths["stubs"], "ssh", f'echo "$@" >> {record}\nexec sleep 30\n')
    out = tunnel(paths["home"], paths["stubs"], "ubuntu@203.0.113.7")
    assert out.returncode == 0, out.stderr  # the stub's sleep ends; the real ssh runs until Ctrl-C
    assert record.read_text().splitlines() == [
        "-N -o ExitOnForwardFailure=yes -o ServerAliveInterval=30 -o ServerAliveCountMax=3 "
        "-L 127.0.0.1:5000:127.0.0.1:5000 ubuntu@203.0.113.7"]
    assert "http://127.0.0.1:5000 is MLflow on ubuntu@203.0.113.7" in out.stderr


def test_mlflow_tunnel_in_the_background_records_its_pid_and_opens_once(tmp_path):
    paths = fake_home(tmp_path)
    record = tmp_path / "ssh_args"
    stub(paths["stubs"], "ssh", f'echo "$@" >> {record}\nexec sleep 60\n')
    pidfile = paths["home"] / ".multigrain" / "mlflow_tunnel.pid"
    out = tunnel(paths["home"], paths["stubs"], "--background", str(pidfile), "-i", "/keys/tunnel_key", "10.0.0.10",
                 "5001")
    assert out.returncode == 0, out.stderr
    pid, start = pidfile.read_text().split()
    try:
        deadline = time.time() + 20
        while not record.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert record.read_text().splitlines() == [
            "-N -o ExitOnForwardFailure=yes -o ServerAliveInterval=30 -o ServerAliveCountMax=3 "
            "-L 127.0.0.1:5001:127.0.0.1:5001 -i /keys/tunnel_key -o BatchMode=yes -o StrictHostKeyChecking=accept-new "
            "10.0.0.10"]
        assert alive(int(pid)) and os.getsid(int(pid)) == int(pid)  # a session of its own
        again = tunnel(paths["home"], paths["stubs"], "--background", str(pidfile), "-i", "/keys/tunnel_key",
                       "10.0.0.10", "5001")
        assert again.returncode == 0 and pidfile.read_text().split() == [pid, start]  # already open
        assert len(record.read_text().splitlines()) == 1
    finally:
        stop_group(int(pid))


def test_mlflow_tunnel_authorizes_a_key_for_forwarding_to_mlflow_only(tmp_path):
    paths = fake_home(tmp_path)
    key = tmp_path / "tunnel_key.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample mlflow-tunnel\n")
    for _ in range(2):  # idempotent
        out = tunnel(paths["home"], paths["stubs"], "--authorize", str(key), "5000")
        assert out.returncode == 0, out.stderr
    authorized = paths["home"] / ".ssh" / "authorized_keys"
    assert authorized.read_text().splitlines() == [
        'restrict,port-forwarding,permitopen="127.0.0.1:5000",command="/bin/false" '
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample mlflow-tunnel"]
    assert authorized.stat().st_mode & 0o077 == 0


def test_start_mlflow_refuses_every_interface(tmp_path):
    paths = fake_home(tmp_path)
    stub(paths["stubs"], "mlflow", "exit 0\n")
    for host in ("0.0.0.0", "::"):
        out = run_script(paths["home"], paths["stubs"], 5125, {"MLFLOW_HOST": host})
        assert out.returncode == 1 and "would listen on every interface" in out.stderr
    assert not (paths["home"] / "mlflow" / "server.pid").exists()
