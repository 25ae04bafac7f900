"""``multigrain serve`` under load: 32 concurrent clients sending short texts for 40 s while one
client sends 14,000-character texts; latency percentiles of the short requests and every
error, for several request paths side by side in one run, written to the "## Serve under load"
section of RESULTS.md.

    .venv/bin/python benchmarks/serve_load.py                 # trains the served model once
    .venv/bin/python benchmarks/serve_load.py --rounds 2      # each path twice, alternating
    .venv/bin/python benchmarks/serve_load.py --seconds 10 --baseline-seconds 0 --no-write   # a quick look

The paths (``--variants``, default ``replica,proxy``): ``replica``, what ``multigrain serve`` does on a
local Ray: each ingress replica answers HTTP itself (``serve_front``); ``proxy``, the previous
default (``--ingress proxy``): Serve's proxy hands each request to the replica in a Ray actor call;
both batch the requests that arrive together (``serve_batching.Batcher``, up to 64 texts).
``unbatched``: through the proxy, one request's texts per forward pass
(``MULTIGRAIN_SERVE_MAX_BATCH=1``); ``grpc``: through the proxy over Serve's gRPC transport
(``RAY_SERVE_PROXY_USE_GRPC=1``). Each variant gets a server of its own, started in turn, under the
same clients; ``--rounds 2`` runs them all twice in turn, so a change of the machine's load during the run
touches each. The load average (1 min) is recorded at
the start and end of every phase, and the CPU seconds per request of the server's processes
(proxy, ingress replica, the rest) and of the clients.

The served model is ``jsonnet_configs/ner/resume_bilstm_crf.jsonnet`` (char + bigram embeddings
50 + 50, one BiLSTM layer of 200, CRF) trained for one epoch on the first 300 Resume NER training
sentences (``runs/bench/serve_load``; its accuracy does not matter here, its cost does). The
server is the real command, ``multigrain serve RUN_DIR --port P ...``, in a process of its own;
clients are threads of this process on keep-alive connections to 127.0.0.1 only, each sending
one request at a time. Short texts are Resume NER test sentences (one per request); long texts
are ``--long-chars`` characters of the same sentences run together. A first phase measures the short
clients alone (``--baseline-seconds``), the second adds the long client.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from results_md import write_section  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from multigrain.platform.ray.serve import Limits  # noqa: E402  (no Ray, no torch)

DATA = ROOT.parent / "shared" / "data" / "resume_ner"
SPEC = "jsonnet_configs/ner/resume_bilstm_crf.jsonnet"
SECTION = "## Serve under load"
LOAD_AT_START = os.getloadavg()[0]


def blocks(path: Path, n: int) -> list[str]:
    return path.read_text(encoding="utf-8").strip("\n").split("\n\n")[:n]


def sentences(path: Path) -> list[str]:
    return ["".join(line.split()[0] for line in block.splitlines() if line.strip()) for block in blocks(path, 10**9)]


def served_model(run_dir: Path) -> Path:
    """The BiLSTM-CRF of SPEC, one epoch on 300 training sentences (trained once, then reused)."""
    if (run_dir / "best.pt").exists():
        return run_dir
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    train, dev = run_dir.parent / "train300.bmes", run_dir.parent / "dev100.bmes"
    train.write_text("\n\n".join(blocks(DATA / "train.char.bmes", 300)) + "\n\n", encoding="utf-8")
    dev.write_text("\n\n".join(blocks(DATA / "dev.char.bmes", 100)) + "\n\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "multigrain.platform.cli", "train", SPEC, "-s", str(run_dir),
                    "--no-tracking", "-o", "trainer.num_epochs=1", "-o", f"train_data_path={train}",
                    "-o", f"validation_data_path={dev}", "-o", f"test_data_path={dev}"],
                   cwd=ROOT, check=True, env=dict(os.environ, MULTIGRAIN_QUIET="1"), stdout=subprocess.DEVNULL)
    return run_dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``multigrain serve`` in a session of its own, stopped with SIGTERM (the command stops
    every Ray process it started)."""

    def __init__(self, run_dir: Path, flags: list[str], log: Path, env: dict | None = None):
        self.port = free_port()
        self.log = open(log, "w+")
        self.path = f"/predict/{run_dir.name}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "multigrain.platform.cli", "serve", str(run_dir), "--port", str(self.port), *flags],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT), MULTIGRAIN_QUIET="1", **(env or {})))
        deadline = time.time() + 300
        while "serving; Ctrl-C" not in self.output():
            if self.process.poll() is not None or time.time() > deadline:
                output = self.output()[-3000:]
                self.stop()
                raise SystemExit(f"multigrain serve did not start:\n{output}")
            time.sleep(0.5)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # its own session: only the server's processes
        self.log.close()


class Client(threading.Thread):
    """One request at a time on one keep-alive connection until ``stop_at``; records
    (start, latency, status) of every request, status "error: ..." for an exception."""

    def __init__(self, port: int, path: str, bodies: list[bytes], stop_at: float, timeout: float):
        super().__init__(daemon=True)
        self.port, self.path, self.bodies, self.stop_at, self.timeout = port, path, bodies, stop_at, timeout
        self.records: list[tuple[float, float, object]] = []

    def run(self) -> None:
        conn, i = None, 0
        while time.time() < self.stop_at:
            body = self.bodies[i % len(self.bodies)]
            i += 1
            start = time.perf_counter()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                conn.request("POST", self.path, body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                answer = response.read()
                status = response.status if response.status != 200 or b'"predictions"' in answer else "no predictions"
            except (OSError, http.client.HTTPException) as e:
                status = f"error: {type(e).__name__}: {e}"
                if conn is not None:
                    conn.close()
                conn = None
            self.records.append((time.time(), time.perf_counter() - start, status))
        if conn is not None:
            conn.close()


def warm_up(server: Server, bodies: list[bytes]) -> None:
    """Untimed requests first (each replica's first forward passes are slower)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=130)
    try:
        for body in bodies:
            conn.request("POST", server.path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"warm-up request answered {response.status}")
    finally:
        conn.close()


def body_of(text: str) -> bytes:
    return json.dumps({"instances": [{"text": text}]}, ensure_ascii=False).encode()


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(server: Server) -> dict[str, float]:
    """CPU seconds so far of the server's processes (its session), by role, and of this process."""
    out: dict[str, float] = {}
    sid = os.getsid(server.process.pid)
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            pid = int(entry.name)
            if pid != os.getpid() and os.getsid(pid) != sid:
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        role = ("clients" if pid == os.getpid() else "proxy" if "ProxyActor" in command
                else "replica" if ":predictor" in command else "long-input replica" if ":long_inputs" in command
                else "rest")
        out[role] = out.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def phase(server: Server, shorts: list[bytes], longs: list[bytes], clients: int, seconds: float) -> dict:
    load_before, cpu_before = os.getloadavg()[0], cpu_seconds(server)
    stop_at = time.time() + seconds
    short = [Client(server.port, server.path, shorts[i::clients], stop_at, 130) for i in range(clients)]
    long = [Client(server.port, server.path, longs, stop_at, 130) for _ in range(1 if longs else 0)]
    for c in short + long:
        c.start()
    for c in short + long:
        c.join(seconds + 140)
    load_after, cpu_after = os.getloadavg()[0], cpu_seconds(server)
    records = [r for c in short for r in c.records]
    every = len(records) + sum(len(c.records) for c in long)
    cpu = {role: round(1000 * (cpu_after[role] - cpu_before.get(role, 0.0)) / max(every, 1), 2) for role in cpu_after}
    ok = sorted(lat for _, lat, status in records if status == 200)
    errors: dict = {}
    for _, _, status in records:
        if status != 200:
            errors[str(status)] = errors.get(str(status), 0) + 1
    long_records = [r for c in long for r in c.records]
    q = statistics.quantiles(ok, n=100, method="inclusive") if len(ok) >= 2 else [float("nan")] * 99
    return {"seconds": seconds, "clients": clients, "requests": len(records), "ok": len(ok), "errors": errors,
            "throughput": len(ok) / seconds, "p50_ms": q[49] * 1000, "p90_ms": q[89] * 1000,
            "p99_ms": q[98] * 1000, "max_ms": (ok[-1] if ok else float("nan")) * 1000,
            "long_requests": len(long_records),
            "long_ok": sum(1 for _, _, s in long_records if s == 200),
            "long_statuses": sorted({str(s) for _, _, s in long_records}),
            "long_latency_s": [round(lat, 1) for _, lat, _ in long_records],
            "load": [round(load_before, 1), round(load_after, 1)], "cpu_ms_per_request": cpu}


def versions() -> str:
    import ray
    import torch

    return f"Python {platform.python_version()}, torch {torch.__version__}, ray {ray.__version__}"


VARIANTS = {  # name: (what it is, environment of the server, flags of the server)
    "replica": ("`multigrain serve` as it is now on a local Ray: each ingress replica answers HTTP itself "
                "(`serve_front`: uvicorn in the replica, no Serve proxy, no actor call), the requests that arrive "
                "together in one forward pass (up to 64 texts)", {}, ["--ingress", "replica"]),
    "proxy": ("the previous default (`--ingress proxy`): Serve's HTTP proxy -> replica in a Ray actor call, "
              "batched as above", {"RAY_SERVE_PROXY_USE_GRPC": "0"}, ["--ingress", "proxy"]),
    "unbatched": ("through the proxy, one request's texts per forward pass (`MULTIGRAIN_SERVE_MAX_BATCH=1`)",
                  {"RAY_SERVE_PROXY_USE_GRPC": "0", "MULTIGRAIN_SERVE_MAX_BATCH": "1"}, ["--ingress", "proxy"]),
    "grpc": ("through the proxy, batched, proxy -> replica over Serve's gRPC transport (`RAY_SERVE_PROXY_USE_GRPC=1`, "
             "room for answers over 4 MiB)", {"RAY_SERVE_PROXY_USE_GRPC": "1",
                                             "RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH": str(2**31 - 1)},
             ["--ingress", "proxy"]),
}
DEFAULT_VARIANTS = ["replica", "proxy"]


def report(args, flags: list[str], results: list[dict]) -> str:
    def row(r: dict, phase_name: str) -> str:
        p = r[phase_name]
        errors = sum(p["errors"].values())
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(p["errors"].items()))
        cpu = p["cpu_ms_per_request"]
        server = sum(v for k, v in cpu.items() if k != "clients")
        what = "short texts only" if phase_name == "baseline" else f"+ 1 client of {args.long_chars:,}-character texts"
        return (f"| {r['variant']} ({r['round']}) | {what} | {p['seconds']:.0f} s | {p['requests']} | "
                f"{p['throughput']:.1f} | {p['p50_ms']:.0f} ms | {p['p90_ms']:.0f} ms | {p['p99_ms']:.0f} ms | "
                f"{p['max_ms']:.0f} ms | {errors}{f' ({detail})' if detail else ''} | "
                f"{server:.1f} ({cpu.get('proxy', 0):.1f} + {cpu.get('replica', 0):.1f}) | "
                f"{p['load'][0]:.1f} -> {p['load'][1]:.1f} |")

    limits = Limits()
    lines = [
        "",
        f"`python benchmarks/serve_load.py --rounds {args.rounds}` ({time.strftime('%Y-%m-%d')}): the real "
        f"`multigrain serve` process and its local Ray on {platform.machine()}, {os.cpu_count()} CPU cores shared "
        f"with other work (load average {LOAD_AT_START:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; per "
        f"phase in the last column), CPU only, {versions()}; clients are threads of the benchmark process on the "
        f"same cores, keep-alive connections to 127.0.0.1, one request at a time each.",
        "",
        f"Model: `{SPEC}` (char + bigram embeddings 50 + 50, BiLSTM 200, CRF; 1 epoch on 300 Resume NER "
        f"sentences: its cost is what matters). Server: `multigrain serve RUN_DIR {' '.join(flags)}` = 1 ingress "
        f"replica and 1 long-input replica (nice 19, one request at a time, {limits.long_input_queue} queued, then "
        f"429), 1 CPU each; limits: body {args.max_body_bytes} bytes, {args.max_text_chars} characters per text, "
        f"{limits.max_instances} instances, requests over {limits.long_input_chars:,} characters to the long-input "
        f"replica; an ingress replica holds {limits.max_ongoing_requests} requests and predicts the ones waiting "
        f"together (up to 64 texts a forward pass), {limits.max_queued_requests} more wait at the proxy. Short "
        f"requests: one Resume NER test sentence each (mean {args.short_mean:.0f} characters); the long client "
        f"sends one {args.long_chars:,}-character text per request, back to back.",
        "",
        "Variants, each a server of its own in turn under the same clients: "
        + "; ".join(f"`{name}`: {VARIANTS[name][0]}" for name in args.variants) + ".",
        "",
        "| variant (round) | phase | time | short requests | per second | p50 | p90 | p99 | max | errors | "
        "server CPU ms per request (proxy + replica) | load average |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in results:
        if r["baseline"]:
            lines.append(row(r, "baseline"))
        lines.append(row(r, "loaded"))
    lines += ["", "Long client during the loaded phases: " + "; ".join(
        f"{r['variant']} ({r['round']}) {r['loaded']['long_requests']} requests, {r['loaded']['long_ok']} answered "
        f"200, in {r['loaded']['long_latency_s']} s" for r in results) + ". A request counts as an error unless it "
        "is answered 200 with predictions; latencies are of the 200s, over every request that the phase sent; CPU "
        "is per request sent (short and long), from /proc."]
    return "\n".join(lines) + "\n"


def variant_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected names from {', '.join(VARIANTS)}, comma-separated")
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", help="a trained run directory to serve (default: train the model above)")
    parser.add_argument("--seconds", type=float, default=40.0, help="the loaded phase (default 40)")
    parser.add_argument("--baseline-seconds", type=float, default=20.0, help="short clients alone first; 0: skip")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--long-chars", type=int, default=14_000)
    parser.add_argument("--max-text-chars", type=int, default=100_000,
                        help="the server's --max-text-chars: at least --long-chars, so the long texts are served")
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20)
    parser.add_argument("--variants", type=variant_list, default=DEFAULT_VARIANTS,
                        help=f"request paths to measure, in this order, from {','.join(VARIANTS)} "
                             f"(default {','.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--rounds", type=int, default=1, help="each variant this many times, alternating")
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS.md")
    parser.add_argument("--json", help="also write the results (and the load averages) to this JSON file")
    args = parser.parse_args(argv)

    run_dir = Path(args.run_dir) if args.run_dir else served_model(ROOT / "runs" / "bench" / "serve_load")
    texts = sentences(DATA / "test.char.bmes")
    args.short_mean = statistics.mean(len(t) for t in texts)
    joined = "".join(texts)
    long_text = (joined * (args.long_chars // len(joined) + 1))[:args.long_chars]
    flags = ["--max-text-chars", str(args.max_text_chars), "--max-body-bytes", str(args.max_body_bytes)]
    shorts = [body_of(t) for t in texts]
    results = []
    for number in range(1, args.rounds + 1):
        for name in args.variants:
            log = ROOT / "runs" / "bench" / f"serve_load_{name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            server = Server(run_dir, flags + VARIANTS[name][2], log, env=VARIANTS[name][1])
            try:
                warm_up(server, shorts[:20] + [body_of(long_text[:5000])])
                base = (phase(server, shorts, [], args.clients, args.baseline_seconds)
                        if args.baseline_seconds else None)
                loaded = phase(server, shorts, [body_of(long_text)], args.clients, args.seconds)
            finally:
                server.stop()
            results.append({"variant": name, "round": number, "baseline": base, "loaded": loaded})
            print(f"{name} ({number}): " + ", ".join(
                f"{key} p50 {r['p50_ms']:.0f} ms p99 {r['p99_ms']:.0f} ms {r['throughput']:.1f}/s "
                f"errors {sum(r['errors'].values())} load {r['load']} cpu {r['cpu_ms_per_request']}"
                for key, r in (("short only", base), ("with long", loaded)) if r), file=sys.stderr, flush=True)
    text = report(args, flags, results)
    print(SECTION + "\n" + text)
    print(json.dumps(results, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"load_at_start": LOAD_AT_START, "load_at_end": os.getloadavg()[0],
                                               "cpus": os.cpu_count(), "versions": versions(), "results": results},
                                              indent=1) + "\n")
    if not args.no_write:
        write_section(SECTION, SECTION + "\n" + text)  # the heading, then a blank line
    return 0


if __name__ == "__main__":
    sys.exit(main())
