"""Bench jobs beyond one machine: each (preset, task, set) a job of a Slurm array through
submitit (an optional extra: pip install 'memnet[cluster]').

Why submitit: a bench is many independent single-core runs, which is what a Slurm array is, and
Slurm is what most university and lab clusters run. submitit needs no server of its own (Ray and
Dask need a cluster started and kept up before the first job, and a Dask or Ray cluster on Slurm
is itself started through Slurm), it pickles a Python function and its arguments to a shared
folder, and its `local` executor runs the same jobs as local processes, which is how the tests
run it. The bench process stays up while the jobs run and writes each record as its job ends
(only it writes records.jsonl); a bench stopped meanwhile resumes like any other.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

from memnet.errors import MemnetError

# what a job asks of Slurm unless --submitit-set says otherwise: one core (train.threads 1)
# and time for config.yaml's slowest task with 10 restarts on a slow core
DEFAULTS = {"name": "memnet-bench", "timeout_min": 240, "cpus_per_task": 1}


def records(jobs: list, run_job: Callable, code: Any, folder: str | Path, cluster: str,
            parameters: dict[str, Any], poll: float = 2.0) -> Iterator[list[dict[str, Any]]]:
    """run_job(job, code) of each job as a submitit job (one array) on `cluster` (slurm, local,
    or auto: slurm where there is one); each job's records as it finishes."""
    try:
        import submitit
    except ImportError:
        raise MemnetError("--submitit: needs the submitit package (pip install 'memnet[cluster]')") from None
    executor = submitit.AutoExecutor(folder=folder, cluster=None if cluster == "auto" else cluster)
    try:
        executor.update_parameters(**{**DEFAULTS, **parameters})
    except (ValueError, TypeError) as e:  # submitit names the parameter and those it knows
        raise MemnetError(f"--submitit-set: {str(e).splitlines()[0]}") from None
    with executor.batch():
        submitted = {executor.submit(run_job, job, code): job for job in jobs}
    pending = list(submitted)
    try:
        while pending:
            done = [j for j in pending if j.done()]
            for j in done:
                pending.remove(j)
                yield result(j, submitted[j])
            if not done:
                time.sleep(poll)
    finally:  # an error or Ctrl-C here: the jobs still queued or running are cancelled
        for j in pending:
            j.cancel(check=False)


def result(submitted: Any, job: Any) -> list[dict[str, Any]]:
    """A finished job's records, or one line naming the job and where its log is."""
    try:
        return submitted.result()
    except Exception as e:  # submitit's FailedJobError (or an unpickling error) carries the job's traceback as text
        last = [line for line in str(e).splitlines() if line.strip()][-1:] or [type(e).__name__]
        raise MemnetError(f"job {job.name} failed: {last[0].strip()} "
                          f"(its log: {submitted.paths.stderr})") from None
