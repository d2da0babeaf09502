"""Every browser test fails on console errors, page errors and CSP violations (see conftest).
This checks that the watch itself sees them, so a quiet run means a clean page."""
import json

import httpx
import pytest
from browser_helpers import STEPS, wait_settled
from csp import csp_directives
from record_factory import make_record

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


# -- a visit of every control: a toy step, a tiny LM step and a record step ------------------------

# Each control's signature: tag, classes (state classes left out), the nearest id above it, its type.
# The first rendered control of each signature is marked data-probe; the test works it, then marks
# the next signature's (on the page as it is then, or on a fresh one where that kind is gone).
CONTROLS = "a[href], button, summary, select, input, [tabindex='0'], .graph [data-node-id]"
SIG = """el => { const scope = el.parentElement.closest('[id]');
  return el.tagName + '.' + (el.getAttribute('class') || '').split(/\\s+/)
    .filter(c => c && !/^(selected|is-|primary|scrolls|card-)/.test(c)).sort().join('.')
    + '@' + (scope ? scope.id : '') + (el.type ? ':' + el.type : ''); }"""
SIGNATURES = """() => { const sig = SIG, seen = [];
  document.querySelectorAll("CONTROLS").forEach(el => {
    if (el.checkVisibility() && !seen.includes(sig(el))) seen.push(sig(el)); });
  return seen;
}""".replace("SIG", SIG).replace("CONTROLS", CONTROLS)
MARK = """([s, base]) => { const sig = SIG;
  document.querySelectorAll('[data-probe]').forEach(el => el.removeAttribute('data-probe'));
  const el = Array.from(document.querySelectorAll("CONTROLS")).find(e => e.checkVisibility() && sig(e) === s);
  if (!el) return null;
  // links that leave the walkthrough (header, API, docs, another walkthrough) are other pages' tests
  const href = el.getAttribute('href');
  if (el.tagName === 'A' && href && !href.startsWith('#') && !href.startsWith(base)) return 'leaves';
  el.setAttribute('data-probe', '');
  return el.tagName.toLowerCase() + (el.type ? ':' + el.type : '');
}""".replace("SIG", SIG).replace("CONTROLS", CONTROLS)


def work_every_control(page, path: str, base: str) -> int:
    page.goto(path, timeout=60_000)
    wait_settled(page)
    worked = 0
    for sig in page.evaluate(SIGNATURES):
        kind = page.evaluate(MARK, [sig, base])
        if kind is None:                       # gone after an earlier swap: on a fresh page
            page.goto(path, timeout=60_000)
            wait_settled(page)
            kind = page.evaluate(MARK, [sig, base])
        if kind in (None, "leaves"):
            continue
        el = page.locator("[data-probe]")
        el.focus()
        if kind.startswith("select"):
            el.select_option(index=1)
        elif kind.startswith("input"):
            el.press("End")
        elif kind in ("a", "button:submit", "button:button", "summary", "g", "a:undefined"):
            el.press("Enter")                  # as a click does, without hit-testing a clipped graph
        else:
            el.hover()
        page.wait_for_load_state()
        if base + "/steps/" not in page.url:   # a plain link to another view of the walkthrough
            page.goto(path, timeout=60_000)
        try:
            wait_settled(page)
        except Exception as e:
            raise AssertionError(f"{sig} ({kind}) on {page.url} did not settle") from e
        page.keyboard.press("Escape")          # a glossary popover or a token card closes
        worked += 1
    return worked


@pytest.mark.slower_tier  # ~90 controls, each a swap: ~2 min
def test_every_control_of_a_toy_a_tiny_lm_and_a_record_step_leaves_the_console_clean(
        page, problems, repo_base_url):
    """The page fixture fails on any console error, page error or CSP violation (htmx's injected
    indicator <style> was one per page before includeIndicatorStyles: false)."""
    record = make_record(seed=3, groups=2, size=4, lengths=(40, 300), packed=True)
    r = httpx.post(repo_base_url + "/api/walkthroughs", timeout=120, files={
        "file": ("small.grpo-step.json", json.dumps(record).encode(), "application/json")})
    assert r.status_code in (200, 201), r.text
    rid = r.json()["id"]
    for base, step in (("/walkthroughs/toy_grpo", "advantages"), ("/walkthroughs/tiny_lm_grpo", "update"),
                       (f"/walkthroughs/{rid}", "ratio")):
        worked = work_every_control(page, f"{repo_base_url}{base}/steps/{step}", base)
        assert worked >= 15, (base, worked)
        assert problems.items == [], (base, problems.items)
    # htmx added no <style> of its own, and the policy allows no inline style
    assert page.evaluate("() => document.querySelectorAll('style').length") == 0
    policy = csp_directives(httpx.get(repo_base_url + "/walkthroughs/toy_grpo/steps/advantages").headers[
        "content-security-policy"])
    assert policy["style-src"] == ["'self'"]
