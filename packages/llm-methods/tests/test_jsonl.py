from __future__ import annotations

import pytest

from llm_methods.jsonl import iter_jsonl, read_jsonl
from llm_methods.lm import LMError


class MyError(ValueError):
    pass


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"q": 1}\n{"q": \n', r"f\.jsonl:2: not valid JSON"),
        ('{"q": 1}\n\n["a"]\n', r"f\.jsonl:3: expected a JSON object"),
        ('{"q": 1}\n{"x": 2}\n', r"f\.jsonl:2: missing field 'q'"),
        ("\n  \n", r"f\.jsonl: no rows"),
    ],
)
def test_errors_name_file_line_field(tmp_path, text: str, match: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "f.jsonl"
    path.write_text(text)
    with pytest.raises(MyError, match=match):
        read_jsonl(path, ("q",), error=MyError, what="rows")


def test_reads_records_with_places(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "f.jsonl"
    path.write_text('{"q": 1}\n\n{"q": 2, "extra": true}\n{"q": 3}\n')
    rows = read_jsonl(path, ("q",), limit=2)
    assert [(w.rsplit(":", 1)[1], r["q"]) for w, r in rows] == [("1", 1), ("3", 2)]
    assert len(list(iter_jsonl(path))) == 3
    with pytest.raises(FileNotFoundError, match="no such file"):
        list(iter_jsonl(tmp_path / "missing.jsonl"))
    path.write_text("{}\n")
    with pytest.raises(LMError, match="missing field 'q'"):  # LMError by default
        read_jsonl(path, ("q",))
