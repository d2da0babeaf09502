"""The CPU a job runner process may take, so that computing never starves serving.

A runner process (`python -m app.worker`, the one `python -m app` starts beside each web process)
runs training jobs of seconds to minutes. Left alone it competed with the web process and the compute
workers for every core, and a newcomer's first pages took 16-48 s while the start-up runs computed
(issue 47). So, once at its start, before it imports a model:

- it lowers its own CPU priority to JOB_NICE (default 19, the lowest): Linux's scheduler then gives
  the web process (nice 0) and the compute workers that draw pages (nice 10,
  app/web/compute_pool.WORKER_NICE) the CPU first whenever they want it. The processes share one
  session, so the kernel's autogroups do not even out their shares.
- it confines itself to JOB_CPUS cores (os.sched_setaffinity; default: all but one where there are two
  or more), the last ones of those it may use, so one core is always free for serving whatever
  the nice values do; every torch thread count in it is bounded by that number (device.job_threads).

Both only ever lower what the process had: a runner already confined to fewer cores keeps them. On
Linux both are a thread's own (a new thread inherits its creator's), so they are set on every thread
the process has when it is called, and the threads it starts later inherit them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class JobCpu:
    nice: int  # the process's nice value after confine()
    cpus: tuple[int, ...]  # the cores it may run on


def job_cpu_count(available: int, setting: int) -> int:
    """JOB_CPUS: `setting` cores (at most those available), or with 0 all but one where there are two or more."""
    if setting > 0:
        return min(setting, available)
    return max(1, available - 1)


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: this thread alone
        return [0]


def confine(nice: int, cpus_setting: int) -> JobCpu:
    """Lower this process's priority to at least `nice` and confine it to its share of the cores."""
    available = sorted(os.sched_getaffinity(0))
    keep = tuple(available[len(available) - job_cpu_count(len(available), cpus_setting):])
    for tid in _threads():
        try:
            if nice > os.getpriority(os.PRIO_PROCESS, tid):
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            if len(keep) < len(available):
                os.sched_setaffinity(tid, keep)
        except (ProcessLookupError, PermissionError):  # a thread gone meanwhile
            continue
    return JobCpu(os.getpriority(os.PRIO_PROCESS, 0), tuple(sorted(os.sched_getaffinity(0))))


def usable_cpus() -> int:
    """The cores this process may run on (its affinity): a job's torch threads never exceed it."""
    return max(1, len(os.sched_getaffinity(0)))
