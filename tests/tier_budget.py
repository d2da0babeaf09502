"""The quick tier stays quick: `--module-budget=SECONDS` fails the run when one test module's tests
took longer than that in all (setup, call and teardown summed, on whichever workers ran them).

`make test` sets it (Makefile: MODULE_BUDGET_S). A module over budget belongs in the research
reproductions (`@pytest.mark.reproduce`, `make reproduce`) or must be made cheaper; the report
names the module and its seconds. It is a guard with a wide margin, not a speed claim: speed is
measured by the benchmark (bench/), never asserted by a test.
"""
from __future__ import annotations

from collections import defaultdict

import pytest


def pytest_addoption(parser) -> None:
    parser.addoption("--module-budget", type=float, default=None, metavar="SECONDS",
                     help="fail the run when one test module takes longer than this in all (the quick tier's guard)")


def pytest_configure(config) -> None:
    if config.getoption("--module-budget") is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(ModuleBudget(config.getoption("--module-budget")), "module-budget")


class ModuleBudget:
    """On the controller (xdist sends every worker's reports there), or in a run without workers."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid.split("::")[0]] += report.duration

    def over(self) -> dict[str, float]:
        return {m: s for m, s in sorted(self.seconds.items(), key=lambda kv: -kv[1]) if s > self.budget_s}

    def pytest_terminal_summary(self, terminalreporter) -> None:
        slowest = sorted(self.seconds.items(), key=lambda kv: -kv[1])[:8]
        terminalreporter.section(f"module budget: {self.budget_s:.0f} s a module")
        for module, seconds in slowest:
            mark = "OVER" if seconds > self.budget_s else "ok"
            terminalreporter.write_line(f"{seconds:8.1f} s  {mark:4}  {module}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        over = self.over()
        if over and exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            session.config.pluginmanager.get_plugin("terminalreporter").write_line(
                "FAILED module budget: " + ", ".join(f"{m} ({s:.0f} s)" for m, s in over.items())
                + f" over {self.budget_s:.0f} s: mark it reproduce or make it cheaper", red=True)
