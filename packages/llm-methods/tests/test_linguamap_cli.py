"""``llm-methods linguamap`` (discovered plugin): consistency and similarity on user files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_methods.cli import main


def test_consistency_counts_detected_languages(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    answers = tmp_path / "a.jsonl"
    rows = [
        {"answer": "la casa es muy grande y tiene un jardín bonito"},
        {"answer": "el perro come la comida en la cocina"},
        {"answer": "the dog eats the food in the kitchen"},
    ]
    answers.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out_file = tmp_path / "c.json"
    args = ["linguamap", "consistency", str(answers), "--expect", "es", "--out", str(out_file)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "3 answers" in out and "consistency (es) 0.667" in out


def test_similarity_prints_one_line_per_layer(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(
        ["the house is big. la casa es grande. das Haus ist groß. "] * 6,
        vocab_size=280,
        n_layers=2,
        hidden=32,
        heads=2,
    )
    folder = tmp_path / "m"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    data = tmp_path / "p.jsonl"
    data.write_text(
        json.dumps({"en": "the house is big", "es": "la casa es grande"})
        + "\n"
        + json.dumps({"en": "the dog", "es": "el perro"})
        + "\n"
    )
    args = ["linguamap", "similarity", "--model", str(folder), "--parallel", str(data)]
    assert main([*args, "--out", str(tmp_path / "s.json")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("layer")]
    assert len(lines) == 3  # embeddings + 2 layers


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"answer": "hola"}\nnot json\n', "a.jsonl:2: not JSON"),
        ('{"text": "hola"}\n', "a.jsonl:1: field 'answer' missing"),
        ("\n", "a.jsonl: no answers"),
    ],
)
def test_bad_answer_files_are_one_line(tmp_path: Path, capsys, content: str, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "a.jsonl"
    path.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["linguamap", "consistency", str(path), "--expect", "es", "--out", str(tmp_path / "c")]
        )
    assert exit_info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0]


def test_parallel_file_needs_two_languages(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"en": "only english"}) + "\n")
    with pytest.raises(SystemExit):
        args = ["linguamap", "similarity", "--model", "smollm2", "--parallel", str(path)]
        main([*args, "--out", str(tmp_path / "s.json")])
    assert "p.jsonl:1: need an object with texts in >= 2 languages" in capsys.readouterr().err


def test_consistency_expects_any_language_the_detector_knows(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: --expect beyond en/es/de; an unknown code is one line on stderr, exit 2."""
    answers = tmp_path / "a.txt"
    answers.write_text(
        "le chien mange la nourriture dans la cuisine\n"
        "la maison est très grande et elle a un beau jardin\n"
        "the dog eats the food in the kitchen\n"
    )
    out_file = tmp_path / "c.json"
    args = ["linguamap", "consistency", str(answers), "--expect", "fr", "--out", str(out_file)]
    assert main(args) == 0
    assert "consistency (fr) 0.667" in capsys.readouterr().out
    record = json.loads(out_file.read_text())
    assert record["detector_languages"] == ["en", "es", "de", "fr"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args[:4], "xx", "--out", str(tmp_path / "d.json")])
    assert exit_info.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "--expect: the detector does not know xx" in err[0]
    with pytest.raises(SystemExit):
        main([*args, "--languages", "en,de", "--overwrite"])
    assert "not among --languages" in capsys.readouterr().err
