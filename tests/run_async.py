"""asyncio.run in its own thread.

Playwright's sync API (the session-scoped browser of tests/browser) keeps an
event loop running on the main thread, so a plain asyncio.run() in a later
test fails with "cannot be called from a running event loop".
"""
import asyncio
import threading


def run_async(coro):
    result, error = [], []

    def target():
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
