"""Imported by every Python process of a Ray that ``ray_cluster/start_own_ray.sh`` starts (its
PYTHONPATH leads here): when ``MULTIGRAIN_RAY_METRICS_HOST`` is set, a ``socketserver`` TCP
server asked to listen on every IPv4 interface ("" or 0.0.0.0) listens on that address instead.

Ray 2.60 starts three Prometheus endpoints this way on a cluster node, with no option for their
address: the dashboard agent's metrics exporter (``--metrics-export-port``,
``ray/_private/prometheus_exporter.py``: ``make_server("")`` unless the node address is a loopback
one), the dashboard's (port 44227) and the autoscaler monitor's (44217), both
``prometheus_client.start_http_server`` with its default 0.0.0.0. They serve without
authentication. Ray's other servers (GCS, raylet, dashboard, agents: gRPC and aiohttp, with token
authentication) do not go through ``socketserver`` and are not touched; neither is a server asked
for a specific address.
"""
import os

_HOST = os.environ.get("MULTIGRAIN_RAY_METRICS_HOST", "").strip()
if _HOST:
    import socket
    import socketserver

    _bind = socketserver.TCPServer.server_bind

    def server_bind(self):
        if self.address_family == socket.AF_INET and self.server_address[0] in ("", "0.0.0.0"):
            self.server_address = (_HOST, *tuple(self.server_address)[1:])
        return _bind(self)

    server_bind.multigrain_metrics_host = _HOST
    socketserver.TCPServer.server_bind = server_bind
