"""Every browser test fails on console errors, page errors and CSP violations (see conftest).
This checks that the watch itself sees them, so a quiet run means a clean page."""
import pytest
from browser_helpers import STEPS, wait_settled

pytestmark = pytest.mark.browser


def test_the_watch_catches_csp_violations_and_script_errors(page, problems):
    page.goto(STEPS[2].path)
    wait_settled(page)
    assert problems.items == []
    page.evaluate("""() => {
        window.__seen = {csp: false, error: false};
        document.addEventListener('securitypolicyviolation', () => { window.__seen.csp = true; });
        window.addEventListener('error', () => { window.__seen.error = true; });
        document.body.insertAdjacentHTML('beforeend', '<div id="probe" style="color: red">x</div>');
        setTimeout(() => { throw new Error('probe error'); }, 0);
    }""")
    # both arrive asynchronously; Playwright delivers their events before this call returns
    page.wait_for_function("() => window.__seen.csp && window.__seen.error")
    text = "\n".join(problems.items)
    assert "CSP violation: style-src-attr" in text, text
    assert "page error: probe error" in text or "Error: probe error" in text, text
    # the CSP held: the inline style was not applied
    assert page.evaluate("getComputedStyle(document.getElementById('probe')).color") != "rgb(255, 0, 0)"
    problems.items.clear()
