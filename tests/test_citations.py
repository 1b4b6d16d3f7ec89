"""What ships cites its sources as a user can find them: the publication, a datasheet, a URL; never a file of the
developers' workspace (their transcription of the evaluation, `SPEC.md`, is not in the repository)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A citation of the developers' transcription: "SPEC §7", "SPEC.md", "shared/SPEC". (SPECAGENT_* variables are not.)
PRIVATE_CITATION = re.compile(r"\bSPEC(\.md)?\s*§|\bSPEC\.md\b|shared/SPEC")


def _shipped_files() -> list[Path]:
    """Every tracked file outside tests/ (tests may read the developers' data; users never see it)."""
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    return [ROOT / f for f in out if f and not f.startswith("tests/")]


def test_nothing_shipped_cites_the_private_transcription():
    hits = []
    for path in _shipped_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        hits += [f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(text.splitlines(), 1)
                 if PRIVATE_CITATION.search(line)]
    assert not hits, "cite the publication (Wang et al., arXiv:2610.21463) or the real source instead: " + ", ".join(hits)


def test_the_check_can_fail():
    assert PRIVATE_CITATION.search("the figures (SPEC §7)") and PRIVATE_CITATION.search("see ../shared/SPEC.md")
    assert not PRIVATE_CITATION.search("SPECAGENT_PURE_PYTHON=1")
