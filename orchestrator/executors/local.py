"""The local executor: episodes of a run concurrently on one machine's GPUs.

Up to `max_parallel` episodes run at once, in threads (an episode mostly waits: on the
model's endpoint, on its sandbox's processes). Each leases the GPUs it needs from a
`GpuPool`; with more episodes than GPUs, `ceil(max_parallel / gpus)` episodes share
a GPU for their model turns, tools and scoring trials, and a timing has its GPU to
itself (see gpus.py). The driver appends each record as it comes (records.RunDir: atomic,
resume-safe). A bad model configuration (or Ctrl-C) stops new episodes from starting;
running ones finish and are recorded; then it is raised. Any other exception escaping
an episode becomes that episode's infra_error record, with its traceback.
"""
from __future__ import annotations

import concurrent.futures
import math
import threading
import time
import traceback
from typing import Any, Sequence

from orchestrator.agent.records import RunDir
from orchestrator.errors import UserError
from orchestrator.executors.gpus import GpuPool
from orchestrator.executors.progress import Progress
from orchestrator.executors.work import Item, Work, failed_record, stops_the_run


class LocalExecutor:
    name = "local"

    def __init__(self, gpus: Sequence[int], max_parallel: int | None = None):
        self.gpus = list(gpus)
        self.max_parallel = max(1, max_parallel or len(self.gpus) or 1)
        slots = math.ceil(self.max_parallel / len(self.gpus)) if self.gpus else 1
        self.pool = GpuPool(self.gpus, slots_per_gpu=slots)

    def describe(self) -> str:
        where = f"GPUs {','.join(map(str, self.gpus))}, {self.pool.slots_per_gpu} per GPU" if self.gpus else "CPU"
        return f"local executor, {self.max_parallel} at a time ({where})"

    def run(self, work: Work, items: Sequence[Item], run_dir: RunDir, progress: Progress) -> None:
        needs = {item["episode_id"]: work.gpus_needed(item, len(self.gpus)) for item in items}
        too_big = [(episode, n) for episode, n in needs.items() if self.gpus and n > len(self.gpus)]
        if too_big:
            episode, n = max(too_big, key=lambda pair: pair[1])
            raise UserError(f"{episode} needs {n} GPUs (one per rank); --gpus gives {len(self.gpus)}: "
                            f"pass more, or a smaller --world-size")
        write_lock = threading.Lock()
        stop = threading.Event()
        errors: list[BaseException] = []

        def one(item: Item) -> None:
            if stop.is_set():
                return
            lease = self.pool.acquire(needs[item["episode_id"]])
            start = time.monotonic()
            try:
                if stop.is_set():
                    return
                record = work(item, lease, run_dir)
            except BaseException as exc:
                if stops_the_run(exc):
                    stop.set()
                    errors.append(exc)
                    return
                record = failed_record(work, item, f"executor: {type(exc).__name__}: {exc}",
                                       traceback.format_exc(), time.monotonic() - start)
            finally:
                lease.release()
            record.setdefault("placement", {}).update(executor=self.name, gpus=list(lease.gpus),
                                                      gpu_scoring_s=round(lease.scoring_s, 3), gpu_spans=lease.spans)
            with write_lock:
                run_dir.append_record(record)
            progress.update(record)

        pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="episode")
        try:
            for future in concurrent.futures.as_completed([pool.submit(one, item) for item in items]):
                future.result()
        except BaseException:  # Ctrl-C: start nothing new; running episodes finish and are recorded
            stop.set()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if errors:
            raise errors[0]
