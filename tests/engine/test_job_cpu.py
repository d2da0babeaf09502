"""The job runner's share of the machine (app/engine/runtime/job_cpu.py): all cores but one by default
where there are two or more, JOB_CPUS otherwise (never more than there are); confine() lowers the
priority and the cores of every thread the process has, those started before it included, and the
threads started after inherit both; it never raises what a process had."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from paths import ROOT

from app.engine.runtime.job_cpu import job_cpu_count


def test_all_cores_but_one_by_default_or_what_job_cpus_says():
    assert [job_cpu_count(n, 0) for n in (1, 2, 4, 16)] == [1, 1, 3, 15]
    assert job_cpu_count(16, 4) == 4 and job_cpu_count(2, 8) == 2 and job_cpu_count(1, 1) == 1


CHILD = """
import json, os, threading, time
from app.engine.runtime.job_cpu import confine
before = threading.Event(); done = threading.Event(); seen = {}
def early():
    before.set(); done.wait()
    seen["early"] = (os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)))
t = threading.Thread(target=early); t.start(); before.wait()
share = confine(NICE, CPUS)
def late():
    seen["late"] = (os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)))
u = threading.Thread(target=late); u.start(); u.join()
done.set(); t.join()
print(json.dumps({"share": [share.nice, list(share.cpus)], **seen}))
"""


def run_child(nice: int, cpus: int, start_nice: int = 0) -> dict:
    code = CHILD.replace("NICE", str(nice)).replace("CPUS", str(cpus))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         preexec_fn=(lambda: os.nice(start_nice)) if start_nice else None)
    return json.loads(out.stdout)


def test_confine_lowers_every_threads_priority_and_cores():
    available = sorted(os.sched_getaffinity(0))
    expected = available[len(available) - job_cpu_count(len(available), 0):]
    seen = run_child(19, 0)
    assert seen["share"] == [19, expected]
    assert seen["early"] == [19, expected] and seen["late"] == [19, expected]


def test_confine_never_raises_a_priority():
    seen = run_child(5, 1, start_nice=12)
    assert seen["share"][0] == 12 and len(seen["share"][1]) == 1
