"""TransformerLens's own tools give right answers on the model (float64, stated tolerances)."""

import pytest

from ictd_interp.analyses.figures.attention_plots import attention_view
from tests.conftest import make_star, make_tasks


def test_attention_view_renders_in_a_headless_browser_with_no_network(tmp_path):
    """The saved page, opened by headless Chromium whose every request goes to a dead proxy, draws the
    view: the DOM after its script ran holds the head selector and the heads it rendered."""
    import shutil
    import subprocess

    pytest.importorskip("circuitsvis")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no headless Chromium (.ci/run installs Debian's chromium)")
    model, prompt = make_star(form="dual"), make_tasks().prompt
    _, cache = model.run_with_cache(prompt)
    page = attention_view(cache, layer=1).save(tmp_path / "view.html")
    dom = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=127.0.0.1:9",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    body = dom.split("<script", 1)[0] + dom.rsplit("</script>", 1)[-1]  # what was drawn, not the script text
    assert "Head Selector" in body and "L1H0" in body and "L1H1" in body  # the React view rendered its heads
