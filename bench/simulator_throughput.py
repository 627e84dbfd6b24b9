"""Role calls per second of the simulator service at a fixed number of requests in flight.

Run: .venvs/simulator/bin/python bench/simulator_throughput.py [--seconds 10] [--in-flight 64]

Two measurements against a real uvicorn process, each compared with its baseline as a ratio:
1. scripted backend: calls/s through HTTP (validation, persistence, metrics included) against the same role
   functions called in-process without HTTP;
2. llm backend against a stub upstream that answers after a fixed 100 ms: calls/s against the ideal
   in_flight / 0.1 s (640 calls/s at 64 in flight).
The workload replays gold trajectories: tool calls, user turns and verifications in their natural mix. Also
reported: latency percentiles, bytes persisted per call, the service's CPU time per call (which, unlike calls/s,
does not depend on what else the machine runs) and its resident memory. Results go to
bench/results/simulator_throughput.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from toolcanary.contract import DifficultySettings, ToolCall, UserRequest, VerifyRequest
from toolcanary.contract.loopback import free_port
from toolcanary.simulator.library_index import load_index
from toolcanary.simulator.scripted import gold_trajectory, make_task
from toolcanary.simulator.scripted.roles import tool_turn, user_turn, verify

RESULTS = Path(__file__).parent / "results" / "simulator_throughput.json"
STUB_ANSWER = json.dumps({"result": '{"status": "completed"}', "reward": 1, "response": "Thanks, that works.",
                          "reasoning": "All expected calls were made."})


def serve_stub(port: int, latency: float) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request):
        await request.body()
        await asyncio.sleep(latency)
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": STUB_ANSWER}}],
                             "usage": {"prompt_tokens": 900, "completion_tokens": 40}})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start(args: list[str], port: int, env: dict | None = None) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(process.stderr.read().decode()[-2000:])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{args} did not listen on {port} within 60 s")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=20)
    process.stderr.close()


def workload(tasks: int = 24) -> list[tuple[str, dict]]:
    """(path, body) of every role call a gold agent makes, over tasks of mixed difficulty."""
    index, calls = load_index(), []
    for number in range(tasks):
        difficulty = DifficultySettings(num_tools=3 + number % 6, expected_calls=1 + number % 3,
                                        user_persona=number % 3, query_ambiguity=number % 2, expected_turns=number % 3)
        task = make_task(index, difficulty, f"bench-{number}", 0).model_dump(mode="json")
        gold = [m.model_dump(mode="json") for m in gold_trajectory(make_task(index, difficulty, f"bench-{number}", 0))]
        for position, message in enumerate(gold):
            if message["role"] == "assistant" and message["tool_calls"]:
                for call in message["tool_calls"]:
                    calls.append(("/v1/tool", {"task": task, "history": gold[: position + 1], "call": call}))
            elif message["role"] == "assistant":
                calls.append(("/v1/user", {"task": task, "history": gold[: position + 1]}))
        calls.append(("/v1/verify", {"task": task, "trajectory": gold, "num_criteria": 2}))
    return calls


def in_process_rate(calls: list[tuple[str, dict]], seconds: float) -> float:
    """Calls/s of the scripted role functions themselves, with request parsing, without HTTP."""
    hints, done, started = load_index().result_hints, 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        path, body = calls[done % len(calls)]
        if path == "/v1/tool":
            from toolcanary.contract import ToolRequest

            request = ToolRequest.model_validate(body)
            tool_turn(request.task, request.history, ToolCall.model_validate(body["call"]),
                      hints.get(request.call.function.name))
        elif path == "/v1/user":
            request = UserRequest.model_validate(body)
            user_turn(request.task, request.history)
        else:
            request = VerifyRequest.model_validate(body)
            verify(request.task, request.trajectory, request.num_criteria)
        done += 1
    return done / (time.perf_counter() - started)


async def load(port: int, calls: list[tuple[str, dict]], in_flight: int, seconds: float, label: str) -> dict:
    """Keep `in_flight` keep-alive connections busy for `seconds`, one request at a time each.

    A bare HTTP/1.1 client on asyncio streams: httpx's AsyncClient itself topped out near 40 calls/s at 64 in
    flight on a 2-core machine, which would measure the client, not the service.
    """
    wire = []
    for path, body in calls:
        data = json.dumps(body).encode()
        wire.append(f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(data)}\r\n\r\n".encode() + data)
    latencies: list[float] = []
    outcomes: dict[str, int] = {}
    progress = tqdm(desc=label, unit="call", leave=False)
    deadline = time.perf_counter() + seconds

    async def connection(offset: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        position = offset
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            writer.write(wire[position % len(wire)])
            position += in_flight
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            status = head.split(b" ", 2)[1].decode()
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            body = await reader.readexactly(length)
            latencies.append(time.perf_counter() - sent)
            key = json.loads(body).get("outcome", "?") if status == "200" else status
            outcomes[key] = outcomes.get(key, 0) + 1
            progress.update()
        writer.close()
        await writer.wait_closed()

    started = time.perf_counter()
    await asyncio.gather(*[connection(n) for n in range(in_flight)])
    elapsed = time.perf_counter() - started
    progress.close()
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 1)  # noqa: E731
    return {"calls": len(latencies), "seconds": round(elapsed, 2), "calls_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": pick(0.5), "p95_ms": pick(0.95), "outcomes": outcomes}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc), to tell service cost from machine contention."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def run_phase(backend: str, calls, args, runs: Path, upstream: str | None = None) -> dict:
    port = free_port()
    cli = ["-m", "toolcanary.simulator", "serve", "--port", str(port), "--backend", backend, "--run", backend,
           "--runs-dir", str(runs), "--log-level", "warning", "--retries", "0", "--timeout-s", "30"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_SIMULATOR_")}
    server = start(cli + (["--upstream", upstream] if upstream else []), port, env)
    try:
        cpu_before = cpu_seconds(server.pid)
        result = asyncio.run(load(port, calls, args.in_flight, args.seconds, backend))
        result["service_cpu_ms_per_call"] = round(1000 * (cpu_seconds(server.pid) - cpu_before) / result["calls"], 2)
        result["service_rss_mib"] = rss_mib(server.pid)
    finally:
        stop(server)
    written = sum(p.stat().st_size for p in (runs / backend / "simulator").glob("*.jsonl"))
    result["bytes_persisted_per_call"] = round(written / max(1, result["calls"]))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  .venvs/simulator/bin/python bench/simulator_throughput.py\n"
                                            "  .venvs/simulator/bin/python bench/simulator_throughput.py --seconds 20\n")
    parser.add_argument("--seconds", type=float, default=10.0, help="load duration per phase")
    parser.add_argument("--in-flight", type=int, default=64, help="concurrent requests")
    parser.add_argument("--latency", type=float, default=0.1, help="stub upstream latency in seconds")
    parser.add_argument("--serve-stub", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stub:
        serve_stub(args.serve_stub, args.latency)
        return 0
    calls = workload()
    baseline = in_process_rate(calls, 3.0)
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        scripted = run_phase("scripted", calls, args, runs)
        stub_port = free_port()
        stub = start([__file__, "--serve-stub", str(stub_port), "--latency", str(args.latency)], stub_port)
        try:
            llm = run_phase("llm", calls, args, runs, upstream=f"http://127.0.0.1:{stub_port}")
        finally:
            stop(stub)
    ideal = args.in_flight / args.latency
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "in_flight": args.in_flight, "seconds_per_phase": args.seconds, "workload_calls": len(calls),
        "scripted": scripted | {"baseline": "scripted role functions in-process, no HTTP",
                                "baseline_calls_per_s": round(baseline, 1),
                                "ratio_vs_baseline": round(scripted["calls_per_s"] / baseline, 3)},
        "llm_stub": llm | {"baseline": f"ideal {args.in_flight} in flight / {args.latency:g} s upstream latency",
                           "baseline_calls_per_s": ideal, "ratio_vs_baseline": round(llm["calls_per_s"] / ideal, 3)},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'phase':<10} {'calls/s':>9} {'baseline/s':>11} {'ratio':>6} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'B/call':>7} {'CPU ms':>7} {'RSS MiB':>8}  outcomes")
    for name in ("scripted", "llm_stub"):
        row = report[name]
        print(f"{name:<10} {row['calls_per_s']:>9} {row['baseline_calls_per_s']:>11} {row['ratio_vs_baseline']:>6} "
              f"{row['p50_ms']:>7} {row['p95_ms']:>7} {row['bytes_persisted_per_call']:>7} "
              f"{row['service_cpu_ms_per_call']:>7} "
              f"{row['service_rss_mib']:>8}  {row['outcomes']}")
    print(f"baselines: scripted = {report['scripted']['baseline']}; llm_stub = {report['llm_stub']['baseline']}")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
