"""Groups concurrent generation requests into one decode. The first waiting request waits for
others up to a window: the larger of `window_s` and a tenth of the last batch's decode time (the
clients a batch just answered need a round trip to ask again; without that share, 16 clients on a
loaded machine settled into two alternating half batches). The batch goes at once when it holds
max_rows rows, or when every open connection has a request in it and no connection opened in the
last `window_s` (so a lone keep-alive client never waits, and a burst of new connections is not
cut after its first request). One worker thread decodes batches one after another; the caller's `run(jobs)` decodes
(under the served model's lock)."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Callable, List, Optional

from .errors import BridgeError
from .sampling import Row


class Job:
    """One request's rows; a streaming job also gets each row's deltas on `events`."""

    def __init__(self, rows: List[Row], events: Optional[queue.Queue] = None):
        self.rows = rows
        self.events = events
        self.version: Optional[int] = None
        self.error: Optional[BridgeError] = None
        self.done = threading.Event()

    def finish(self, error: Optional[BridgeError] = None) -> None:
        self.error = error
        self.done.set()
        if self.events is not None:
            self.events.put(("end", error))

    def abandon(self) -> None:
        for r in self.rows:
            r.abandoned = True


class Batcher:
    # The share of the last batch's decode time a batch may wait for more requests.
    WAIT_SHARE = 0.1

    def __init__(self, run: Callable[[List[Job]], None], window_s: float = 0.005, max_rows: int = 256):
        self._run = run
        self.window_s = window_s
        self._last_s = 0.0
        self.max_rows = max_rows
        self._cv = threading.Condition()
        self._pending: deque = deque()
        self._connections = 0
        self._last_open = 0.0
        self._closed = False
        self.stats = {"batches": 0, "requests": 0, "rows": 0, "largest_batch_requests": 0, "largest_batch_rows": 0}
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "Batcher":
        self._thread = threading.Thread(target=self._loop, name="batcher", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()

    def connection(self, delta: int) -> None:
        """An HTTP connection opened (+1) or closed (-1)."""
        with self._cv:
            self._connections += delta
            if delta > 0:
                self._last_open = time.monotonic()
            self._cv.notify_all()

    def submit(self, job: Job) -> Job:
        with self._cv:
            if self._closed:
                raise BridgeError("unavailable", "the server is shutting down", retryable=True)
            self._pending.append(job)
            self._cv.notify_all()
        return job

    def _next(self) -> Optional[List[Job]]:
        with self._cv:
            while not self._pending and not self._closed:
                self._cv.wait()
            if not self._pending:
                return None
            deadline = time.monotonic() + max(self.window_s, self.WAIT_SHARE * self._last_s)
            while True:
                now = time.monotonic()
                rows = sum(len(j.rows) for j in self._pending)
                settled = now - self._last_open >= self.window_s
                if rows >= self.max_rows or self._closed or (settled and len(self._pending) >= self._connections):
                    break
                left = deadline - now
                if left <= 0:
                    break
                # wake when the connections have been still for window_s, if nothing comes first
                self._cv.wait(left if settled else min(left, self._last_open + self.window_s - now))
            jobs, rows = [], 0
            while self._pending and (not jobs or rows + len(self._pending[0].rows) <= self.max_rows):
                j = self._pending.popleft()
                jobs.append(j)
                rows += len(j.rows)
            return jobs

    def _loop(self) -> None:
        while True:
            jobs = self._next()
            if jobs is None:
                return
            rows = sum(len(j.rows) for j in jobs)
            s = self.stats
            s["batches"] += 1
            s["requests"] += len(jobs)
            s["rows"] += rows
            s["largest_batch_requests"] = max(s["largest_batch_requests"], len(jobs))
            s["largest_batch_rows"] = max(s["largest_batch_rows"], rows)
            t0 = time.monotonic()
            try:
                self._run(jobs)
            except BridgeError as e:
                for j in jobs:
                    j.finish(e)
            except Exception as e:  # noqa: BLE001 - every waiting request must hear of it
                err = BridgeError("internal", f"{type(e).__name__}: {e}")
                for j in jobs:
                    j.finish(err)
            else:
                for j in jobs:
                    j.finish()
            self._last_s = time.monotonic() - t0
