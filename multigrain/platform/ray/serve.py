"""Serving archives over HTTP with Ray Serve: one application per archive at
``/predict/<name>``, its replicas holding the model in memory.

Faults. Serve replicas cannot take ``max_restarts`` (Serve forbids it): the Serve controller
health-checks replicas and replaces one that dies, reloading its archive.
"""
from __future__ import annotations

import socket
from typing import Any, Optional

from multigrain.platform.errors import ConfigurationError, MultigrainError
from multigrain.platform.ray.cluster import gpus_per_actor


class ArchivePredictor:
    """A Serve replica holding one archive's model: ``POST {"instances": [{"text": ...}]}`` ->
    ``{"predictions": [...]}``, the same JSON as ``archive.predict_batches``."""

    def __init__(self, run_dir: str, batch_size: Optional[int] = None):
        from multigrain.platform.runs import Run

        self.archive = Run.open(run_dir).load_archive()
        self.batch_size = batch_size  # None: the spec's data_loader.eval_batch_size

    def predict(self, payload: Any) -> dict:
        instances = payload.get("instances") if isinstance(payload, dict) else None
        if not isinstance(instances, list) or not all(isinstance(x, dict) for x in instances):
            raise ValueError('expected a JSON body {"instances": [{"text": ...}, ...]}')
        model = self.archive.model
        built = []
        for n, data in enumerate(instances):
            try:
                built.append(model.text_to_instance(data))
            except (KeyError, ValueError) as e:
                raise ValueError(f"instances[{n}]: cannot make an example: {e}") from None
        return {"predictions": list(self.archive.predict_batches(built, self.batch_size))}

    async def __call__(self, request):
        from starlette.responses import JSONResponse

        if request.method != "POST":
            return JSONResponse({"error": 'POST a JSON body {"instances": [{"text": ...}]}'}, status_code=405)
        try:
            payload = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        try:
            return JSONResponse(self.predict(payload))
        except (ValueError, MultigrainError) as e:
            return JSONResponse({"error": str(e)}, status_code=400)


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise ConfigurationError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None


def start_service(named: dict[str, str], host: str = "127.0.0.1", port: int = 8000, replicas: int = 1,
                  num_cpus: float = 1.0, num_gpus: Optional[float] = None) -> dict[str, str]:
    """One Serve application per archive at ``/predict/<name>``; returns name -> URL."""
    from ray import serve

    gpus = gpus_per_actor(num_gpus)
    serve.start(http_options={"host": host, "port": port})
    urls = {}
    for name, run_dir in named.items():
        deployment = serve.deployment(ArchivePredictor, name="predictor", num_replicas=replicas,
                                      ray_actor_options={"num_cpus": num_cpus, "num_gpus": gpus})
        serve.run(deployment.bind(run_dir), name=name, route_prefix=f"/predict/{name}")
        urls[name] = f"http://{host}:{port}/predict/{name}"
    return urls

