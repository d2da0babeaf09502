"""Peer tests: prints, after the run, the largest relative difference found per framework and quantity
(the figures docs/how-to/peer-tests.md quotes), whether or not `-s` is given."""
from __future__ import annotations

from peers.cases import AGREEMENT, TOKEN_AGREEMENT, fmt


def pytest_configure(config):
    # what importing the frameworks says about optional parts this machine lacks (engines, GPUs)
    for message in ("ignore:.* engine is not available:UserWarning",
                    "ignore:Ray state API is no longer experimental:DeprecationWarning"):
        config.addinivalue_line("filterwarnings", message)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not AGREEMENT.worst:
        return
    tr = terminalreporter
    tr.section("peer agreement: max |framework - app| / max(1, |app|)")
    for (framework, quantity), (rel, where) in sorted(AGREEMENT.worst.items()):
        count = AGREEMENT.compared[(framework, quantity)]
        tr.write_line(f"{framework:5s} {quantity:58s} {fmt(rel):>8s}  over {count:3d} comparisons (max at {where})")
    for framework in sorted({f for f, _ in AGREEMENT.worst}):
        worst = max(rel for (f, _), (rel, _) in AGREEMENT.worst.items() if f == framework)
        tr.write_line(f"{framework}: max relative difference {fmt(worst)}")
    if TOKEN_AGREEMENT.worst:
        tr.section("token level (test_token_level.py): max relative difference per framework and aggregation")
        for (framework, aggregation), (rel, where) in sorted(TOKEN_AGREEMENT.worst.items()):
            count = TOKEN_AGREEMENT.compared[(framework, aggregation)]
            tr.write_line(f"{framework:5s} {aggregation:15s} {fmt(rel):>8s}  over {count:3d} comparisons "
                          f"(max at {where})")
