"""The claims report: its verdict rules worked by hand, the theorem rows on θ*, and a tiny budget end to end
on Ray (resumed, refused when the budget changes). The quick budget in full is a slow test."""

import json

import pytest

from ictd_interp.analyses.claims.budget import BUDGETS
from ictd_interp.analyses.claims.claim import HOLDS
from ictd_interp.analyses.claims.claims_md import TITLES
from ictd_interp.analyses.claims.run import ORDER, run_claims
from tests.support.claims import TINY


@pytest.mark.slow  # 65 s; tests/unit/test_claims.py holds every rule, tests/slow/test_claims.py the quick budget
def test_a_tiny_budget_end_to_end_resumed_and_refused_when_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    rows = run_claims(tmp_path / "c", TINY, workers=2, progress=False)
    assert [r.id for r in rows] == list(ORDER) and set(TITLES) == set(ORDER)
    by_id = {r.id: r for r in rows}
    assert by_id["theorem1"].verdict == HOLDS and by_id["theorem2_rate"].verdict == "holds on every task with C > 0"
    text = (tmp_path / "c" / "claims.md").read_text()
    assert all(TITLES[i] in text for i in ORDER) and text.count("**Rule.**") == len(ORDER)
    for row in rows:
        assert row.verdict and row.numbers and row.rule
        if row.figure:
            assert (tmp_path / "c" / "figures" / f"{row.figure}.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "c" / "claims.json").read_text())
    assert saved["budget"]["name"] == "tiny" and len(saved["claims"]) == len(ORDER)
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "c" / "rows").iterdir()}
    again = run_claims(tmp_path / "c", TINY, workers=2, progress=False)  # resumed: every row reused
    as_json = lambda claims: json.loads(json.dumps([c.to_dict() for c in claims], default=str))  # noqa: E731
    assert as_json(again) == as_json(rows)
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "c" / "rows").iterdir()} == stamps
    with pytest.raises(FileExistsError, match="budget"):
        run_claims(tmp_path / "c", BUDGETS["quick"], progress=False)
