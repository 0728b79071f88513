"""Outputs written whole or not at all (``ictd_interp.io.staging.staged``)."""

import pytest

from ictd_interp.io.staging import staged


def test_files_replace_the_folders_only_when_every_one_is_written(tmp_path):
    (tmp_path / "summary.json").write_text("old")
    with staged(tmp_path) as work:
        (work / "figures").mkdir()
        (work / "summary.json").write_text("new")
        (work / "figures" / "a.png").write_bytes(b"png")
        assert (tmp_path / "summary.json").read_text() == "old"  # nothing replaced before the end
    assert (tmp_path / "summary.json").read_text() == "new" and (tmp_path / "figures" / "a.png").read_bytes() == b"png"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures", "summary.json"]  # no staging folder left


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interruption_leaves_the_folder_as_it_was(tmp_path, error):
    (tmp_path / "summary.json").write_text("old")
    with pytest.raises(error), staged(tmp_path) as work:
        (work / "summary.json").write_text("half")
        raise error()
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    assert (tmp_path / "summary.json").read_text() == "old"
