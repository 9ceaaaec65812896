"""Plain batch runner for the demo data and the catalog policy (not the product sandbox).

Reads one JSON request on stdin: {"jobs": [{"program", "style", "entryPoint", "tests",
"timeSeconds", "memoryMb"}]}; each test is {"input": str} (stdio) or {"args": [...]} (call).
Writes one JSON reply on stdout: {"results": [[{"status", "output", "error"}...] per job]}.
status: ok | error (raised, with exception type) | timeout | compile_error | crash | skipped
(after a timeout, when the job sets stopOnTimeout).
Each (program, test) runs in a forked child with rlimits, so a bad program cannot hurt the
batch; expected values never come here: comparison happens in TypeScript.
"""
import io
import json
import os
import resource
import select
import signal
import sys
import time

MAX_OUTPUT = 1 << 20


def child(code, job, test, wfd):
    mem = int(job.get("memoryMb", 256)) * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    except (ValueError, OSError):
        pass
    cpu = int(float(job.get("timeSeconds", 2)) + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    sys.setrecursionlimit(20000)
    out = io.StringIO()
    reply = {"status": "ok", "output": ""}
    try:
        g = {"__name__": "__main__" if job["style"] == "stdio" else "candidate"}
        if job["style"] == "stdio":
            sys.stdin = io.StringIO(test["input"])
            sys.stdout = out
            try:
                exec(code, g)
            except SystemExit:
                pass
            reply["output"] = out.getvalue()
        else:
            exec(code, g)
            parts = job["entryPoint"].split(".")
            fn = g[parts[0]]
            if len(parts) == 2:
                fn = getattr(fn(), parts[1])
            result = fn(*json.loads(json.dumps(test["args"])))
            reply["output"] = json.dumps(result, sort_keys=True)
    except BaseException as e:  # noqa: BLE001 - every failure of the candidate is data
        reply = {"status": "error", "error": type(e).__name__, "message": str(e)[:200]}
    data = json.dumps(reply)[:MAX_OUTPUT].encode()
    sys.stdout = sys.__stdout__
    view = memoryview(data)
    while view:
        n = os.write(wfd, view)
        view = view[n:]
    os._exit(0)


def run_one(code, job, test):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(code, job, test, w)
    os.close(w)
    deadline = time.monotonic() + float(job.get("timeSeconds", 2))
    chunks = []
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], left)
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"status": "timeout"}
    try:
        return json.loads(b"".join(chunks).decode())
    except ValueError:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        if sig == signal.SIGXCPU:
            return {"status": "timeout"}
        return {"status": "crash", "error": "signal %d" % sig}


def main():
    req = json.load(sys.stdin)
    results = []
    for job in req["jobs"]:
        try:
            code = compile(job["program"], "<candidate>", "exec")
        except (SyntaxError, ValueError) as e:
            results.append([{"status": "compile_error", "error": type(e).__name__}
                            for _ in job["tests"]])
            continue
        row = []
        for t in job["tests"]:
            # A program that already timed out is known to fail; skip the rest to save time.
            if job.get("stopOnTimeout") and row and row[-1]["status"] in ("timeout", "skipped"):
                row.append({"status": "skipped"})
            else:
                row.append(run_one(code, job, t))
        results.append(row)
    sys.stdout.write(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
