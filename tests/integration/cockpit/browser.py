"""Drives the cockpit in the system's Chromium with Playwright (never a downloaded browser).

    browser.py check URL SCREENSHOT_DIR   the browser test (tests/integration/cockpit/browser.rs)
    browser.py paint URL RUNS             first paint of the assessment list, in ms (the bench)
    browser.py tasks URL EXPECT           the Tasks panel on load (EXPECT: JSON, below)

`check` opens the token URL, starts a consultation from the page and checks that the
advisor rows update live, the disagreement appears, a cancel works and an advisor's
cooldown shows after an auth failure; it checks labels, contrast and keyboard use, and
saves screenshots at laptop and phone widths, light and dark. Any failure exits non-zero.
"""

import json
import re
import sys

from playwright.sync_api import sync_playwright, expect

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 20_000
# `expect` has its own default (5 s), which a loaded CI machine can outlast while a job
# is still queued: every assertion polls up to the same bound as the page's actions.
expect.set_options(timeout=TIMEOUT_MS)


def launch(p):
    return p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])


def fail(message):
    print(f"browser.py: {message}", file=sys.stderr)
    sys.exit(1)


CONTRAST = """
() => {
  function rgb(text) { const m = text.match(/[\\d.]+/g).map(Number); return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 }; }
  function lum(c) { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); }
  function background(node) {
    for (let n = node; n; n = n.parentElement) { const c = rgb(getComputedStyle(n).backgroundColor); if (c.a > 0.5) return c; }
    return rgb(getComputedStyle(document.body).backgroundColor);
  }
  const worst = [];
  for (const node of document.querySelectorAll("h1, h2, th, td, label, button, .muted, .badge, p, a")) {
    if (!node.offsetParent || !node.textContent.trim()) continue;
    const style = getComputedStyle(node);
    if (style.opacity !== "1") continue;
    const fg = lum(rgb(style.color)), bg = lum(background(node));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    if (ratio < 4.5 && !node.disabled) worst.push(`${node.tagName}.${node.className} "${node.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
  }
  return worst;
}
"""

LABELS = """
() => {
  const missing = [];
  for (const node of document.querySelectorAll("input, select, textarea")) {
    if (node.type === "hidden") continue;
    if (!(node.labels && node.labels.length) && !node.getAttribute("aria-label")) missing.push(node.id || node.name);
  }
  for (const node of document.querySelectorAll("button")) {
    if (!(node.getAttribute("aria-label") || node.textContent.trim())) missing.push("a button");
  }
  for (const table of document.querySelectorAll("table")) {
    if (!table.querySelector("th")) missing.push("a table without headers");
  }
  return missing;
}
"""


def accessible(page, theme, out):
    page.emulate_media(color_scheme=theme)
    low = page.evaluate(CONTRAST)
    if low:
        fail(f"contrast below 4.5:1 in the {theme} theme: {low[:5]}")
    missing = page.evaluate(LABELS)
    if missing:
        fail(f"controls without a label or name: {missing}")
    out["checks"].append(f"contrast and labels ({theme})")


def keyboard(page, out):
    # From the top of the page, Tab reaches a "Consult" button and Enter would press it.
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    page.locator("body").focus()
    for _ in range(60):
        page.keyboard.press("Tab")
        label = page.evaluate("() => document.activeElement && (document.activeElement.getAttribute('aria-label') || document.activeElement.textContent)")
        if label and label.startswith("Consult on"):
            visible = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
            if visible == "none":
                fail("the focused button shows no focus outline")
            # The list is drawn again whenever a record is written: the keyboard keeps its
            # place on the same button.
            page.evaluate("() => loadStatus()")
            again = page.evaluate("() => [document.activeElement && document.activeElement.getAttribute('aria-label'), getComputedStyle(document.activeElement).outlineStyle]")
            if again[0] != label or again[1] == "none":
                fail(f"drawing the assessments again lost the keyboard's place on {label!r}: focus is on {again[0]!r}, outline {again[1]!r}")
            out["checks"].append("keyboard reaches Consult")
            out["checks"].append("keyboard keeps its place when the list is drawn again")
            return
    fail("Tab never reached a Consult button")


def check(url, shots):
    out = {"checks": [], "steps": []}
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # Every resource the page asks for is served: a 404 (a favicon the daemon does not
        # serve, say) shows in the console on every load.
        missing = []
        page.on("response", lambda r: missing.append(f"{r.status} {r.url}") if r.status == 404 else None)
        page.on("console", lambda m: missing.append(m.text) if m.type == "error" and "404" in m.text else None)
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        if "token=" in page.url:
            fail(f"the token stayed in the address bar: {page.url}")
        cookies = context.cookies()
        token = [c for c in cookies if c["name"] == "advisord_token"]
        if not token or not token[0]["httpOnly"] or token[0]["sameSite"] != "Strict":
            fail(f"no HttpOnly, SameSite=Strict cookie: {cookies}")
        out["checks"].append("token traded for a strict cookie")

        rows = page.locator("tr[data-assessment]")
        expect(rows).to_have_count(2)
        expect(page.locator("#live")).to_have_text("live")
        # The Tasks panel lists the task whose records the page shows, on load.
        task = page.locator("#task").input_value()
        expect(page.locator("#tasks")).to_contain_text(task)
        expect(page.locator("#tasks")).not_to_contain_text("No task has records yet.")
        out["checks"].append("tasks listed on load")
        page.screenshot(path=f"{shots}/overview.png", full_page=True)

        # Start a consultation of the first assessment from the page.
        first = rows.nth(0)
        first.get_by_role("button", name=re.compile("^Consult on")).click()
        job = page.locator("article.job").first
        expect(job).to_be_visible()
        # Advisor rows update live: asked while the advisors think, then recorded.
        asked = job.locator('tr[data-advisor="a"][data-step="asked"]')
        expect(asked).to_be_visible()
        out["steps"].append("a asked")
        page.screenshot(path=f"{shots}/job-running.png", full_page=True)
        expect(job.locator('tr[data-advisor="a"][data-step="recorded"]')).to_be_visible()
        expect(job.locator('tr[data-advisor="b"][data-step="recorded"]')).to_be_visible()
        expect(job.locator('tr[data-advisor="c"][data-step="failed"]')).to_be_visible()
        out["steps"].append("a and b recorded, c failed")
        expect(job.locator(".badge").first).to_have_text("done")

        # The disagreement appears, with its discriminating question.
        disagreement = page.locator("article.disagreement").first
        expect(disagreement).to_be_visible()
        expect(disagreement.locator(".question")).to_contain_text("Discriminating question")
        expect(first.locator(".badge")).to_have_text("disputed")
        out["checks"].append("disagreement shown")
        page.screenshot(path=f"{shots}/disagreement.png", full_page=True)

        # The advisor that failed on auth is cooling down, with a countdown.
        cooling = page.locator('tr[data-advisor="c"]').last
        expect(page.locator('#advisor-rows tr[data-advisor="c"]')).to_have_attribute("data-status", "temporarily_failed")
        expect(page.locator('#advisor-rows tr[data-advisor="c"] td.countdown')).to_have_text(re.compile(r"\d+ min"))
        out["checks"].append("cooldown shown")
        # Each advisor has a track record cell (none settled yet), said to decide nothing.
        expect(page.locator('#advisor-rows tr[data-advisor="a"] td.track')).to_have_text("—")
        expect(page.locator("#track-note")).to_contain_text("change no plan, selection or review count")
        out["checks"].append("track records shown as information")
        page.locator("#advisors-panel").screenshot(path=f"{shots}/advisors.png")
        del cooling

        # Explain, tree and plan preview.
        first.get_by_role("button", name=re.compile("^Explain")).click()
        expect(page.locator("#explain")).to_contain_text("Path:")
        expect(page.locator("#tree li").first).to_be_visible()
        page.get_by_role("button", name="Preview").click()
        expect(page.locator("#plan")).to_contain_text("Selected")
        out["checks"].append("explain, tree and plan preview")

        # Cancel a running consultation of the second assessment.
        rows.nth(1).get_by_role("button", name=re.compile("^Consult on")).click()
        running = page.locator("article.job").first
        expect(running.locator('tr[data-step="asked"]').first).to_be_visible()
        running.get_by_role("button", name=re.compile("^Cancel job")).click()
        expect(running.locator(".badge").first).to_have_text("cancelled")
        out["checks"].append("cancel works")
        page.screenshot(path=f"{shots}/cancelled.png", full_page=True)

        accessible(page, "light", out)
        keyboard(page, out)
        accessible(page, "dark", out)
        page.screenshot(path=f"{shots}/dark.png", full_page=True)
        page.emulate_media(color_scheme="light")
        page.set_viewport_size({"width": 390, "height": 844})
        page.screenshot(path=f"{shots}/phone.png", full_page=True)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 1:
            fail(f"the page is {overflow} px wider than a phone")
        out["checks"].append("phone width")
        if errors:
            fail(f"the page raised: {errors}")
        if missing:
            fail(f"the page asked for what the daemon does not serve: {missing}")
        out["checks"].append("no 404 on load")
        browser.close()
    print(json.dumps(out))


def tasks(url, expect_json):
    """The Tasks panel of a page opened on a root whose tasks already have records.

    EXPECT is {"marked": TASK or "", "records": N, "listed": [TASK, ...]}: once the list
    shows N records, the panel lists every task named, marks TASK (or none), and never says
    that no task has records. Prints what the panel showed.
    """
    want = json.loads(expect_json)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        expect(page.locator("#assessments-summary")).to_contain_text(f"{want['records']} records in task")
        panel = page.locator("#tasks")
        for task in want["listed"]:
            expect(panel.get_by_role("button", name=task, exact=True)).to_be_visible()
        marked = panel.locator('button[aria-current="true"]')
        if want["marked"]:
            expect(marked).to_have_text(want["marked"])
        else:
            expect(marked).to_have_count(0)
        expect(panel).not_to_contain_text("No task has records yet.")
        listed = panel.locator("button").all_text_contents()
        shown = marked.all_text_contents()
        if errors:
            fail(f"the page raised: {errors}")
        browser.close()
    print(json.dumps({"listed": listed, "marked": shown[0] if shown else ""}))


def paint(url, runs):
    """The time from navigation to the first paint of the assessment list, per run (ms)."""
    figures = []
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        # Each load is measured alone: the page's later requests (the tree reads the whole
        # task too) end before the next navigation starts.
        settled = "() => document.getElementById('tree-label').textContent !== ''"
        page.goto(url)  # trades the token for the cookie
        page.wait_for_function(settled)
        clean = page.url
        for _ in range(runs):
            page.goto(clean)
            page.wait_for_function("() => performance.getEntriesByName('cockpit-list-painted').length > 0")
            figures.append(page.evaluate("() => performance.getEntriesByName('cockpit-list-painted')[0].startTime"))
            page.wait_for_function(settled)
            rows = page.locator("tr[data-assessment]").count()
            if rows == 0:
                fail(f"the list painted empty: {page.locator('#live').text_content()} / {page.locator('#assessments-summary').text_content()}")
        timings = page.evaluate("""() => {
            const nav = performance.getEntriesByType('navigation')[0];
            const out = {dom_content_loaded: nav.domContentLoadedEventEnd, start: performance.getEntriesByName('cockpit-start')[0].startTime};
            for (const r of performance.getEntriesByType('resource')) out[r.name.split('?')[0].split('/').slice(-2).join('/')] = [Math.round(r.startTime), Math.round(r.duration)];
            return out;
        }""")
        browser.close()
    print(json.dumps({"paint_ms": figures, "last_load": timings}))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "paint", "tasks"):
        fail("usage: browser.py check URL SCREENSHOT_DIR | browser.py paint URL RUNS | browser.py tasks URL EXPECT")
    if sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "tasks":
        tasks(sys.argv[2], sys.argv[3])
    else:
        paint(sys.argv[2], int(sys.argv[3]))
