"""Lines in pytest's output even without -s: the figures a run measured (cases, requests, RSS)."""
from __future__ import annotations


def report(request, line: str) -> None:
    """A line in pytest's output even without -s."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is None or reporter is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("\n" + line)
