"""The run log's site in a real headless browser: Debian's Chromium and its chromedriver, driven
by Selenium (evidence/history_site.py starts it, and times the 1,000-run site in it).

Skipped where no browser is installed; under CONCURRENCY_TESTS_STRICT (.ci/run) a missing
browser fails instead: ``apt-get install -y chromium chromium-driver``. Cost: the browser's start
and four pages: 35 s for both tests at a load average of 30 on the 2-core machine (not measured
at rest)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import need
from test_runlog import HOSTILE, URL, a_history

from pytest_concurrency.__main__ import main as cli

pytestmark = [pytest.mark.slow, pytest.mark.essential]

SCRIPT = Path(__file__).resolve().parent.parent / "evidence" / "history_site.py"


def _evidence():
    spec = importlib.util.spec_from_file_location("history_site", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def browser():
    evidence = _evidence()
    try:
        driver = evidence.chromium()
    except evidence.NoBrowser as exc:
        need("chromium", str(exc))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    folder, _ = a_history(tmp)
    out = tmp / "site"
    assert (
        cli(["history", str(folder), "--html", str(out), "--repo-url", URL, "--repo", str(tmp)])
        == 0
    )
    return out


def errors(driver) -> list:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_the_index_loads_without_a_console_error_and_a_filter_narrows_it(browser, made):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get((made / "index.html").as_uri())
    assert errors(browser) == []
    rows = browser.find_elements(By.CSS_SELECTOR, "#rows tr")
    assert len(rows) == 4 and all(r.is_displayed() for r in rows)
    assert browser.find_element(By.ID, "count").text == "4 of 4 benchmarks"
    # every sparkline drawn: a polyline of one vertex a run
    lines = browser.find_elements(By.CSS_SELECTOR, "svg.spark polyline")
    assert [len(line.get_attribute("points").split()) for line in lines] == [6, 6, 2, 6]
    Select(browser.find_element(By.ID, "model")).select_by_value("gevent")
    shown = [r.text.split("\n")[0] for r in rows if r.is_displayed()]
    assert len(shown) == 2 and all("on gevent" in line for line in shown)
    Select(browser.find_element(By.ID, "measure")).select_by_value("instructions")
    assert browser.find_element(By.ID, "count").text == "1 of 4 benchmarks"
    Select(browser.find_element(By.ID, "model")).select_by_value("")
    Select(browser.find_element(By.ID, "measure")).select_by_value("")
    browser.find_element(By.ID, "name").send_keys("evil")
    (row,) = [r for r in rows if r.is_displayed()]
    assert HOSTILE in row.text  # shown as text: no element was made of it
    assert browser.find_elements(By.CSS_SELECTOR, "#rows img") == []
    assert errors(browser) == []


def test_a_case_page_draws_a_point_a_run_and_links_the_regression_to_its_commit(browser, made):
    from selenium.webdriver.common.by import By

    browser.get((made / "index.html").as_uri())
    browser.find_element(By.LINK_TEXT, "ring[n=10] on gevent").click()
    assert "/c/" in browser.current_url and errors(browser) == []
    timed, counted = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    gevent = timed.find_element(By.CSS_SELECTOR, 'g.series[data-model="gevent"]')
    points = gevent.find_elements(By.CSS_SELECTOR, "circle.point")
    assert len(points) == 6 and all(p.size["width"] > 0 for p in points)  # drawn, one a run
    assert gevent.find_elements(By.CSS_SELECTOR, "polygon.band")  # the interval's band
    assert len(counted.find_elements(By.CSS_SELECTOR, "circle.point")) == 2
    (marker,) = browser.find_elements(By.CSS_SELECTOR, "a.regression-link")
    assert marker.get_dom_attribute("href") == f"{URL}/commit/{'4' * 40}"
    assert marker.find_element(By.TAG_NAME, "path").size["height"] > 0
    browser.get((made / "regressions.html").as_uri())
    link = browser.find_element(By.CSS_SELECTOR, "td a[href^='https://']")
    assert link.get_attribute("href") == f"{URL}/commit/{'4' * 40}" and errors(browser) == []
