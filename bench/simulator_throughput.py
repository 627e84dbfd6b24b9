"""Role calls per second of the simulator service at a fixed number of requests in flight.

Run: .venvs/simulator/bin/python bench/simulator_throughput.py [--seconds 10] [--in-flight 64] [--repeats 3]
     .venvs/simulator/bin/python bench/simulator_throughput.py --seconds 1 --repeats 1     # a smoke run

Two measurements against a real uvicorn process (started with a random bearer token, which the load client
sends as the trainer does), each compared with its baselines as a ratio:
1. scripted backend: calls/s through HTTP against two in-process loops without HTTP:
   - `service`: the same work the service does per call: parse the request bytes with the contract model,
     resolve the task from the key, run the same `SimulatorService` role code, append the same record to a
     file, serialise the response to bytes;
   - `roles`: the scripted role functions alone, with request parsing (no records, no serialisation);
2. llm backend against a stub upstream that answers after a fixed 100 ms: calls/s against the ideal
   in_flight / 0.1 s (640 calls/s at 64 in flight).
The workload first authors every task through POST /v1/task, so that its keys are issued, then replays gold
trajectories by key: tool calls, user turns and verifications in their natural mix (the llm phase reuses the
scripted phase's records, so the tasks it plays are issued there too). Every figure is the median of
`--repeats` runs. Also reported: latency percentiles, bytes persisted per call, the service's CPU time per
call (which, unlike calls/s, does not depend on what else the machine runs) and its resident memory. Results
go to bench/results/simulator_throughput.json (`--out` for another path).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tqdm import tqdm

from toolcanary.common.loopback import free_port
from toolcanary.contract import DifficultySettings, ToolRequest, UserRequest, VerifyRequest
from toolcanary.simulator.library_index import load_index
from toolcanary.simulator.records import RecordStore
from toolcanary.simulator.scripted import ScriptedBackend, gold_trajectory
from toolcanary.simulator.scripted.roles import tool_turn, user_turn, verify
from toolcanary.simulator.service import SimulatorService
from toolcanary.simulator.settings import SimulatorSettings

RESULTS = Path(__file__).parent / "results" / "simulator_throughput.json"
TOKEN = secrets.token_hex(16)  # the service refuses to start without one; the load client sends it
PATHS = {"tool": "/v1/tool", "user": "/v1/user", "verify": "/v1/verify"}
MODELS = {"/v1/tool": ToolRequest, "/v1/user": UserRequest, "/v1/verify": VerifyRequest}
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


def authoring(tasks: int = 24) -> list[dict]:
    """The POST /v1/task bodies of the workload: tasks of mixed difficulty."""
    return [{"task_key": f"bench-{n}", "difficulty": DifficultySettings(
        num_tools=3 + n % 6, expected_calls=1 + n % 3, user_persona=n % 3, query_ambiguity=n % 2,
        expected_turns=n % 3).model_dump(mode="json")} for n in range(tasks)]


def author(port: int, bodies: list[dict]) -> dict[str, dict]:
    """Author every task through the service (so that its key is issued); the tasks by key."""
    tasks = {}
    for body in bodies:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/task", data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json",
                                                  "authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            task = json.loads(answer.read())["task"]
        if task is None:
            raise RuntimeError(f"the simulator authored no task for {body['task_key']}")
        tasks[body["task_key"]] = task
    return tasks


def workload(tasks: dict[str, dict]) -> list[tuple[str, bytes]]:
    """(path, body bytes) of every role call a gold agent makes on `tasks`, each naming its task by key."""
    from toolcanary.contract import SimulatedTask

    index, calls = load_index(), []
    for key, task in tasks.items():
        gold = [m.model_dump(mode="json") for m in gold_trajectory(SimulatedTask.model_validate(task), index)]
        for position, message in enumerate(gold):
            if message["role"] == "assistant" and message["tool_calls"]:
                for call in message["tool_calls"]:
                    calls.append(("/v1/tool", {"task_key": key, "history": gold[: position + 1], "call": call}))
            elif message["role"] == "assistant":
                calls.append(("/v1/user", {"task_key": key, "history": gold[: position + 1]}))
        calls.append(("/v1/verify", {"task_key": key, "trajectory": gold, "num_criteria": 2}))
    return [(path, json.dumps(body).encode()) for path, body in calls]


def roles_rate(calls: list[tuple[str, bytes]], tasks: dict, seconds: float) -> float:
    """Calls/s of the scripted role functions themselves, with request parsing, without HTTP or records."""
    from toolcanary.contract import SimulatedTask

    hints, done, started = load_index().result_hints, 0, time.perf_counter()
    known = {key: SimulatedTask.model_validate(task) for key, task in tasks.items()}
    while time.perf_counter() - started < seconds:
        path, body = calls[done % len(calls)]
        request = MODELS[path].model_validate_json(body)
        task = known[request.task_key]
        if path == "/v1/tool":
            tool_turn(task, request.history, request.call, hints.get(request.call.function.name))
        elif path == "/v1/user":
            user_turn(task, request.history)
        else:
            verify(task, request.trajectory, request.num_criteria)
        done += 1
    return done / (time.perf_counter() - started)


def service_rate(calls: list[tuple[str, bytes]], bodies: list[dict], seconds: float, runs: Path) -> float:
    """Calls/s of the service's own per-call work without HTTP: parse the bytes, resolve the task by key, run
    the `SimulatorService` role (which appends the record to a file), serialise the response to bytes."""
    from toolcanary.contract import TaskRequest

    settings = SimulatorSettings(run="in-process", runs_dir=runs, insecure=True)
    index = load_index()
    store = RecordStore(settings.records_dir)
    service = SimulatorService(settings, ScriptedBackend(index, settings.seed), store)
    roles = {"/v1/tool": service.tool, "/v1/user": service.user, "/v1/verify": service.verify}

    async def loop() -> float:
        for body in bodies:
            await service.task(TaskRequest.model_validate(body))
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            path, body = calls[done % len(calls)]
            answer = await roles[path](MODELS[path].model_validate_json(body))
            answer.model_dump_json().encode()
            done += 1
        return done / (time.perf_counter() - started)

    try:
        return asyncio.run(loop())
    finally:
        store.close()
        service.registry.close()


async def load(port: int, calls: list[tuple[str, bytes]], in_flight: int, seconds: float, label: str) -> dict:
    """Keep `in_flight` keep-alive connections busy for `seconds`, one request at a time each.

    A bare HTTP/1.1 client on asyncio streams: httpx's AsyncClient itself topped out near 40 calls/s at 64 in
    flight on a 2-core machine, which would measure the client, not the service.
    """
    wire = []
    for path, data in calls:
        wire.append(f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
                    f"authorization: Bearer {TOKEN}\r\ncontent-length: {len(data)}\r\n\r\n".encode() + data)
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


def run_phase(backend: str, bodies: list[dict], args, runs: Path, upstream: str | None = None) -> dict:
    """One load run of `backend`; its records go to the run `scripted` (the llm phase finds the tasks there)."""
    port = free_port()
    cli = ["-m", "toolcanary.simulator", "serve", "--port", str(port), "--backend", backend, "--run", "scripted",
           "--runs-dir", str(runs), "--log-level", "warning", "--retries", "0", "--timeout-s", "30"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLCANARY_SIMULATOR_")}
    env["TOOLCANARY_SIMULATOR_TOKEN"] = TOKEN
    records = runs / "scripted" / "simulator"
    server = start(cli + (["--upstream", upstream] if upstream else []), port, env)
    try:
        calls = workload(author(port, bodies))
        written_before = sum(p.stat().st_size for p in records.glob("step_*.jsonl"))
        cpu_before = cpu_seconds(server.pid)
        result = asyncio.run(load(port, calls, args.in_flight, args.seconds, backend))
        result["service_cpu_ms_per_call"] = round(1000 * (cpu_seconds(server.pid) - cpu_before) / result["calls"], 3)
        result["service_rss_mib"] = rss_mib(server.pid)
    finally:
        stop(server)
    written = sum(p.stat().st_size for p in records.glob("step_*.jsonl")) - written_before
    result["bytes_persisted_per_call"] = round(written / max(1, result["calls"]))
    result["request_bytes_mean"] = round(sum(len(body) for _, body in calls) / len(calls))
    return result, calls


def median_of(runs: list[dict]) -> dict:
    """Each number the median over the runs; the outcomes summed."""
    out = {}
    for key, value in runs[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = round(statistics.median(run[key] for run in runs), 3)
        elif key == "outcomes":
            out[key] = {k: sum(run[key].get(k, 0) for run in runs) for k in {k for run in runs for k in run[key]}}
        else:
            out[key] = value
    return out


def one_repeat(args, bodies: list[dict]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        scripted, calls = run_phase("scripted", bodies, args, runs)
        tasks = {json.loads(body)["task_key"] for _, body in calls}
        authored = {t.task_key: t.model_dump(mode="json") for _, t in RecordStore(runs / "scripted" / "simulator")
                    .iter_tasks() if t.task_key in tasks}
        service = service_rate(calls, bodies, args.baseline_seconds, runs)
        roles = roles_rate(calls, authored, args.baseline_seconds)
        stub_port = free_port()
        stub = start([__file__, "--serve-stub", str(stub_port), "--latency", str(args.latency)], stub_port)
        try:
            llm, _ = run_phase("llm", bodies, args, runs, upstream=f"http://127.0.0.1:{stub_port}")
        finally:
            stop(stub)
    ideal = args.in_flight / args.latency
    return {"scripted": scripted | {"baseline_service_calls_per_s": round(service, 1),
                                    "baseline_roles_calls_per_s": round(roles, 1),
                                    "ratio_vs_service": round(scripted["calls_per_s"] / service, 3),
                                    "ratio_vs_roles": round(scripted["calls_per_s"] / roles, 3)},
            "llm_stub": llm | {"baseline_ideal_calls_per_s": ideal,
                               "ratio_vs_ideal": round(llm["calls_per_s"] / ideal, 3)}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  .venvs/simulator/bin/python bench/simulator_throughput.py\n"
                                            "  .venvs/simulator/bin/python bench/simulator_throughput.py --seconds 20\n"
                                            "  .venvs/simulator/bin/python bench/simulator_throughput.py --seconds 1 "
                                            "--repeats 1   # smoke\n")
    parser.add_argument("--seconds", type=float, default=10.0, help="load duration per phase")
    parser.add_argument("--in-flight", type=int, default=64, help="concurrent requests")
    parser.add_argument("--latency", type=float, default=0.1, help="stub upstream latency in seconds")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the median is reported")
    parser.add_argument("--tasks", type=int, default=24, help="tasks the workload authors and replays")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON results go")
    parser.add_argument("--serve-stub", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stub:
        serve_stub(args.serve_stub, args.latency)
        return 0
    args.baseline_seconds = min(3.0, args.seconds)
    bodies = authoring(args.tasks)
    repeats = [one_repeat(args, bodies) for _ in range(args.repeats)]
    scripted = median_of([r["scripted"] for r in repeats])
    llm = median_of([r["llm_stub"] for r in repeats])
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "in_flight": args.in_flight, "seconds_per_phase": args.seconds, "repeats": args.repeats,
        "workload_calls": scripted["calls"] and len(bodies),
        "baselines": {"service": "the service's per-call work in-process, no HTTP: parse the bytes, resolve the "
                                 "task, role code, record appended to a file, response serialised",
                      "roles": "scripted role functions in-process with request parsing; no HTTP, no records",
                      "ideal": f"{args.in_flight} in flight / {args.latency:g} s upstream latency"},
        "scripted": scripted, "llm_stub": llm, "runs": repeats,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"medians of {args.repeats} run(s), {args.seconds:g} s per phase, {args.in_flight} in flight")
    print(f"{'phase':<9} {'calls/s':>8} {'baseline':>9} {'calls/s':>8} {'ratio':>6} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'B/call':>7} {'CPU ms':>7} {'RSS MiB':>8}  outcomes")
    rows = [("scripted", "service", scripted["baseline_service_calls_per_s"], scripted["ratio_vs_service"]),
            ("", "roles", scripted["baseline_roles_calls_per_s"], scripted["ratio_vs_roles"]),
            ("llm_stub", "ideal", llm["baseline_ideal_calls_per_s"], llm["ratio_vs_ideal"])]
    for name, baseline, rate, ratio in rows:
        row = scripted if baseline != "ideal" else llm
        own = (f"{row['calls_per_s']:>8} " if name else f"{'':>8} ")
        tail = (f"{row['p50_ms']:>7} {row['p95_ms']:>7} {row['bytes_persisted_per_call']:>7} "
                f"{row['service_cpu_ms_per_call']:>7} {row['service_rss_mib']:>8}  {row['outcomes']}") if name else ""
        print(f"{name:<9} {own}{baseline:>9} {rate:>8} {ratio:>6} {tail}")
    print("baselines: " + "; ".join(f"{k} = {v}" for k, v in report["baselines"].items()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
