"""Open a report page in Debian's Chromium through Playwright and say what a reader would see.

Playwright drives the system browser (`chromium`, installed from Debian's packages when missing and this runs
as root; Playwright's own browser download is never used). The page is opened from its file with the network
blocked, so a page that needs anything from outside shows it as a failed request.

    .venvs/analysis/bin/python tests/analysis/report_browser.py volumes/results/RUN/report/index.html shot.png
    python3 tests/analysis/report_browser.py --install     # only find or install Chromium; prints its path

prints JSON: the console errors and page errors, requests that left the file, the ids of the sections, the
headline table (aggregate -> shown cells and full-precision values), the status line's steps and the truncated
and overlong items per step (step -> {group.column: shown count}).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def chromium() -> str:
    """The system Chromium's executable; installs Debian's package when it is missing and this is root."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.geteuid() != 0:
        raise RuntimeError("the report's browser test needs Chromium: install Debian's package (sudo apt-get "
                           "install chromium) and rerun")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Waits for the package lock rather than failing on it: make test installs it in its background lane.
    install = ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=900", "chromium"]
    if subprocess.run(install, env=env, capture_output=True, timeout=1200).returncode != 0:
        subprocess.run(["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=900"], env=env, check=True,
                       capture_output=True, timeout=900)
        subprocess.run(install, env=env, check=True, capture_output=True, timeout=1200)
    return shutil.which("chromium") or "/usr/bin/chromium"


READ_PAGE = """() => ({
  sections: [...document.querySelectorAll('main > section')].map(s => s.id),
  headline: Object.fromEntries([...document.querySelectorAll('#headline tbody tr[data-aggregate]')].map(tr => [
    tr.dataset.aggregate,
    [...tr.querySelectorAll('td[data-value]')].map(td => [td.textContent.trim(), td.dataset.value])])),
  headers: [...document.querySelectorAll('#headline thead th')].map(th => th.textContent.trim()),
  scored: [...document.querySelectorAll('#scored-steps span')].map(s => Number(s.dataset.step)),
  pending: [...document.querySelectorAll('#pending-steps span')].map(s => Number(s.dataset.step)),
  images: [...document.querySelectorAll('img')].map(i => [i.alt, i.naturalWidth]),
  categories: [...document.querySelectorAll('#categories tbody tr')].map(tr =>
    [tr.dataset.category, [...tr.querySelectorAll('td')].slice(1).map(td => td.textContent.trim())]),
  overrides: [...document.querySelectorAll('#overrides tbody tr')].map(tr => [Number(tr.dataset.step),
    Object.fromEntries([...tr.querySelectorAll('td[data-column]')].map(td => [td.dataset.column, td.textContent.trim()]))]),
  text: document.body.innerText,
})"""


def inspect_page(page_path: Path, screenshot: Path) -> dict:
    """What the page shows in a real browser, with a full-page screenshot written to `screenshot`."""
    from playwright.sync_api import sync_playwright

    errors, outside = [], []
    with sync_playwright() as playwright:
        # --no-sandbox: the test runs as root in CI, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))

            def route(request_route):
                url = request_route.request.url
                if url.startswith(("file:", "data:")):
                    request_route.continue_()
                else:
                    outside.append(url)
                    request_route.abort()

            page.route("**/*", route)
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            seen = page.evaluate(READ_PAGE)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return {"errors": errors, "outside_requests": outside, "screenshot": str(screenshot), **seen}


if __name__ == "__main__":
    if sys.argv[1:] == ["--install"]:
        print(chromium())
    elif len(sys.argv) == 3:
        print(json.dumps(inspect_page(Path(sys.argv[1]), Path(sys.argv[2]))))
    else:
        sys.exit("usage: report_browser.py PAGE.html SCREENSHOT.png | report_browser.py --install")
