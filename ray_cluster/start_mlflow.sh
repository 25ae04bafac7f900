#!/usr/bin/env bash
# The cluster's MLflow tracking server, run on the head by the cluster YAMLs:
#   - behind MLflow's basic-auth app (--app-name basic-auth): every request needs the user and
#     password of ~/.mlflow/credentials (synced from the laptop by file_mounts; the same file is
#     what MLflow clients on every node read), and that user is the server's admin;
#   - listening on the head's 127.0.0.1 only: basic auth sends the password with every request
#     and the server speaks plain HTTP, so no request crosses a network unencrypted; the laptop
#     and the other nodes reach it through SSH tunnels (mlflow_tunnel.sh, ray_cluster/README.md).
#     MLFLOW_HOST=ADDRESS listens elsewhere (behind TLS of your own); never on every interface.
# Users and passwords live in ~/mlflow/basic_auth.db; the admin is created from the credentials
# on the first start only (change a password later with MLflow's update-password API).
#   bash ray_cluster/start_mlflow.sh [PORT]        (default 5000; does nothing when it runs already)
set -euo pipefail
port="${1:-5000}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
state="$HOME/mlflow"
credentials="$HOME/.mlflow/credentials"

if [ ! -r "$credentials" ]; then
  echo "start_mlflow.sh: $credentials not found: create it on the laptop (see ray_cluster/README.md," \
       "'Credentials') so that file_mounts copies it here" >&2
  exit 1
fi
# user and password from the [mlflow] section, as MLflow clients read them
read -r user password < <(python3 - "$credentials" <<'EOF'
import configparser, sys
c = configparser.ConfigParser()
c.read(sys.argv[1])
s = c["mlflow"] if c.has_section("mlflow") else {}
print(s.get("mlflow_tracking_username", ""), s.get("mlflow_tracking_password", ""))
EOF
)
if [ -z "$user" ] || [ -z "$password" ]; then
  echo "start_mlflow.sh: $credentials needs mlflow_tracking_username and mlflow_tracking_password" \
       "under [mlflow]" >&2
  exit 1
fi
if [ "${#password}" -lt 12 ]; then
  echo "start_mlflow.sh: the password in $credentials is shorter than 12 characters (MLflow refuses it)" >&2
  exit 1
fi

host="${MLFLOW_HOST:-127.0.0.1}"
case "$host" in
  ''|0.0.0.0|::|'[::]'|'*')
    echo "start_mlflow.sh: MLFLOW_HOST=$host would listen on every interface; give one address" >&2
    exit 1 ;;
esac

mkdir -p "$state"
chmod 700 "$state"
if [ -f "$state/server.pid" ] && kill -0 "$(cat "$state/server.pid")" 2>/dev/null; then
  echo "start_mlflow.sh: already running (pid $(cat "$state/server.pid"))"
  exit 0
fi
# the basic-auth app's CSRF secret: random, made on the first start, kept across restarts
if [ ! -s "$state/secret_key" ]; then
  (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' > "$state/secret_key")
fi
cd "$state"  # basic_auth.db (mlflow_auth.ini: database_uri sqlite:///basic_auth.db) lands here
# uvicorn's supervisor (MLFLOW_WORKERS, default 4 workers) kills a worker that does not answer its
# health check in time and starts another: its default 5 s is less than a worker takes to import
# MLflow on a busy head, and the workers were killed and restarted for ever; 60 s lets them start.
MLFLOW_FLASK_SERVER_SECRET_KEY="$(cat "$state/secret_key")" \
MLFLOW_AUTH_CONFIG_PATH="$here/mlflow_auth.ini" \
MLFLOW_AUTH_ADMIN_USERNAME="$user" \
MLFLOW_AUTH_ADMIN_PASSWORD="$password" \
  nohup mlflow server --app-name basic-auth --host "$host" --port "$port" \
    --uvicorn-opts "--timeout-worker-healthcheck 60" \
    --backend-store-uri "sqlite:///$state/mlruns.db" --artifacts-destination "$state/artifacts" \
    > "$state/server.log" 2>&1 &
echo $! > "$state/server.pid"
echo "start_mlflow.sh: MLflow (basic auth, user $user) on http://$host:$port, log $state/server.log"
