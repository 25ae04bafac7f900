#!/usr/bin/env bash
# The cluster's MLflow tracking server, run on the head by the cluster YAMLs:
#   - behind MLflow's basic-auth app (--app-name basic-auth): every request needs the user and
#     password of ~/.mlflow/credentials (synced from the laptop by file_mounts; the same file is
#     what MLflow clients on every node read), and that user is the server's admin;
#   - listening on the head's private address only (never 0.0.0.0): reach it from the laptop
#     through an SSH tunnel (ray_cluster/README.md).
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

host="$(hostname -I | awk '{print $1}')"  # the private address (the VPC / LAN interface)
if [ -z "$host" ] || [ "$host" = "0.0.0.0" ]; then
  echo "start_mlflow.sh: no private address found (hostname -I)" >&2
  exit 1
fi

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
MLFLOW_FLASK_SERVER_SECRET_KEY="$(cat "$state/secret_key")" \
MLFLOW_AUTH_CONFIG_PATH="$here/mlflow_auth.ini" \
MLFLOW_AUTH_ADMIN_USERNAME="$user" \
MLFLOW_AUTH_ADMIN_PASSWORD="$password" \
  nohup mlflow server --app-name basic-auth --host "$host" --port "$port" \
    --backend-store-uri "sqlite:///$state/mlruns.db" --artifacts-destination "$state/artifacts" \
    > "$state/server.log" 2>&1 &
echo $! > "$state/server.pid"
echo "start_mlflow.sh: MLflow (basic auth, user $user) on http://$host:$port, log $state/server.log"
