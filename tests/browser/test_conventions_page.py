"""The loss conventions in the browser: choosing a preset in the form fills its fields, the
step recomputes under it, and the group table and the line under the loss say what changed."""
import re

import pytest
from browser_helpers import BY_ID, numbers, wait_settled
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

TENSORS = "/api/walkthroughs/toy_grpo/step"
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True}


def overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def test_choosing_the_trl_preset_recomputes_under_its_conventions(make_context, shot):
    page = make_context().new_page()
    page.goto(BY_ID["clip"].path)
    wait_settled(page)
    expect(page.locator("#conventions-line")).to_have_text("Conventions: DeepSeekMath paper.")
    expect(page.locator('#group-table-full th[data-column="kl_rho_factor"]')).to_have_count(0)
    expect(page.locator("#more-conventions")).not_to_have_attribute("open", "")

    page.get_by_label("preset", exact=True).select_option("trl")
    # the preset's values fill the folded fields, so the form does not send the old ones back
    expect(page.locator("#p-beta")).to_have_value("0")
    expect(page.locator("#p-kl_bias_correction")).to_have_value("true")
    expect(page.locator("#p-advantage_std")).to_have_value("sample")
    page.get_by_role("button", name="Recompute").click()
    expect(page).to_have_url(re.compile(r"/steps/clip\?preset=trl$"))
    wait_settled(page)
    expect(page.locator("#conventions-line")).to_have_text("Conventions: TRL 1.16 defaults.")
    expect(page.locator("#group-conventions legend")).to_have_text("Loss conventions (preset: TRL 1.16 defaults)")
    # the clip step's table shows no KL yet (docs/design.md §1b); the full table folds under the inspector
    expect(page.locator('#group-table th[data-column="kl_rho_factor"]')).to_have_count(0)
    page.locator("#full-table > summary").click()
    rho = page.locator('#group-table-full th[data-column="kl_rho_factor"]')
    expect(rho).to_be_visible()
    expect(rho).to_contain_text("ρ factor")
    api = page.request.get(TENSORS, params={"preset": "trl"}).json()
    assert numbers(page, "#group-table-full tbody tr") == [
        float(s[k]) for s in api["samples"] for k in ("reward", "advantage", "ratio", "clipped", "divergence",
                                                      "kl_rho_factor", "kl_used", "objective", "weight",
                                                      "ratio_grad")]

    # an override on top of the preset is named next to the loss
    page.locator("#p-beta").fill("0.04")
    page.get_by_role("button", name="Recompute").click()
    expect(page).to_have_url(re.compile(r"[?&]beta=0\.04(&|$)"))
    wait_settled(page)
    expect(page.locator("#conventions-line")).to_have_text("Conventions: TRL 1.16 defaults (β overridden to 0.04).")
    shot(page, "trl-beta")


def test_phone_shows_the_conventions_without_sideways_scrolling(make_context, shot):
    page = make_context(**PHONE).new_page()
    page.goto(BY_ID["clip"].path + "?preset=verl&rewards=1,0,0,0,0,0,0,0")
    wait_settled(page)
    assert overflow(page) == 0
    expect(page.locator("#conventions-line")).to_have_text("Conventions: verl 0.9.1 GRPO.")
    expect(page.locator('#group-table th[data-column="clamps"]')).to_have_count(1)
    summary = page.locator("#more-conventions > summary")
    summary.scroll_into_view_if_needed()
    summary.click()  # unfold the rest of the conventions
    expect(page.locator("#p-dual_clip")).to_be_visible()
    expect(page.locator("#p-dual_clip")).to_have_value("3")
    assert overflow(page) == 0
    for field in ("#p-preset", "#p-loss_aggregation", "#p-kl_clamp"):
        box = page.locator(field).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, (field, box)
    shot(page, "phone-verl")
