"""I/O failures on the output side (a file where a folder should be) are one-line CLI errors, exit 2."""
from __future__ import annotations

from vlnverse.cli import main


def test_generate_into_a_file_path_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    rc = main(["scenes", "generate", "--count", "1", "--seed", "1", "--out", str(blocker), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("vlnverse: error:") and "afile" in err[0]
    assert blocker.read_text() == "not a folder"


def test_render_map_under_a_file_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    rc = main(["scenes", "render-map", "home_0012", "--out", str(blocker / "map.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "afile" in err[0]
