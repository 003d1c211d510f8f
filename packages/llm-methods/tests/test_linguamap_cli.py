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


def test_consistency_output_keeps_the_records_ids(tmp_path: Path) -> None:
    """Issue 40 review: the output named answers by position only; each item now carries the
    record's own id (``--id-field``), its line in the file, and its detected language. The ids are
    deliberately not 0..n-1 and a blank line shifts the line numbers."""
    answers = tmp_path / "a.jsonl"
    rows = [
        {"qid": "q-17", "answer": "la casa es muy grande y tiene un jardín bonito"},
        {"qid": 4, "answer": "the dog eats the food in the kitchen"},
        {"answer": "el perro come la comida en la cocina"},
    ]
    lines = [json.dumps(rows[0]), "", json.dumps(rows[1]), json.dumps(rows[2])]
    answers.write_text("\n".join(lines) + "\n")
    out_file = tmp_path / "c.json"
    args = ["linguamap", "consistency", str(answers), "--expect", "es", "--out", str(out_file)]
    assert main([*args, "--id-field", "qid"]) == 0
    items = json.loads(out_file.read_text())["items"]
    assert items == [
        {"id": "q-17", "line": 1, "language": "es"},
        {"id": 4, "line": 3, "language": "en"},
        {"id": None, "line": 4, "language": "es"},
    ]
    # the default id field is "id": these records have none
    assert main([*args, "--overwrite"]) == 0
    assert [i["id"] for i in json.loads(out_file.read_text())["items"]] == [None, None, None]


def test_consistency_rejects_a_non_scalar_id_in_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"id": [1], "answer": "hola"}) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["linguamap", "consistency", str(path), "--expect", "es", "--out", str(tmp_path / "c")]
        )
    assert exit_info.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "a.jsonl:1: field 'id' is not a string or an integer" in err[0]


def test_unknown_expect_lists_each_known_language_once(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The detector's model lists sr and uz twice; the error message listed them twice."""
    answers = tmp_path / "a.txt"
    answers.write_text("hola\n")
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "linguamap",
                "consistency",
                str(answers),
                "--expect",
                "xx",
                "--out",
                str(tmp_path / "c"),
            ]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    listed = err.split("(it knows: ", 1)[1].split(")", 1)[0].split(", ")
    assert "sr" in listed and "uz" in listed and "en" in listed
    assert len(listed) == len(set(listed)) > 50


# ``linguamap finetune`` (issue 40: selective fine-tuning had no command line)


@pytest.fixture(scope="module")
def three_layers(saved_tiny_lm) -> Path:  # type: ignore[no-untyped-def]
    """An untrained 3-layer Llama folder with a BPE of English/Spanish text."""
    texts = ["repeat: the house is big => la casa es grande\n"] * 8
    return saved_tiny_lm("lm3", texts, vocab_size=280, n_layers=3, hidden=32, heads=2)


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    path = tmp_path / "ft.jsonl"
    records = [
        {"prompt": "repite: la casa es grande =>", "answer": " la casa es grande\n"},
        {"prompt": "repeat: the house is big =>", "answer": " the house is big\n"},
    ] * 4
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def _finetune(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "linguamap",
        "finetune",
        "--model",
        str(model),
        "--data",
        str(data),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--steps",
        "3",
        "--max-len",
        "32",
        *extra,
    ]


def test_finetune_trains_only_the_last_k_layers(
    three_layers: Path, pairs: Path, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """Only the last k layers change; the folder is a model every command loads; progress on
    stderr; the record names the layers and the trained fraction."""
    import torch
    from transformers import AutoModelForCausalLM

    from iclr26_common.testing import run_main

    out = tmp_path / "ft"
    run = run_main(main, _finetune(three_layers, pairs, out, "--last-k", "1"), capsys)
    assert run.code == 0, run.err
    assert "training layers [2] of 3" in run.out and "training steps" in run.err
    # an ordinary folder (d875146: save_pretrained's model.safetensors was 0600)
    assert all(f.stat().st_mode & 0o777 == 0o644 for f in out.iterdir())
    record = json.loads((out / "linguamap_finetune.json").read_text())
    assert record["layers"] == [2] and 0 < record["trained_fraction"] < 0.5
    assert len(record["losses"]) == 3 and record["cut_at_max_len"] == 0
    assert not (out / ".iclr26-partial").exists()
    before = AutoModelForCausalLM.from_pretrained(three_layers).state_dict()
    after = AutoModelForCausalLM.from_pretrained(out).state_dict()
    changed = {k.split(".")[2] for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"2"}, changed  # model.layers.2.* only (embeddings, norm untouched)
    quiet = run_main(
        main,
        [*_finetune(three_layers, pairs, tmp_path / "q", "--layers", "0,-1"), "--quiet"],
        capsys,
    )
    assert quiet.code == 0 and quiet.err == "" and "training layers [0, 2]" in quiet.out
    assert (
        run_main(main, ["generate", "--model", str(out), "--prompt", "repite:"], capsys).code == 0
    )


def test_finetune_checks_out_before_any_work(pairs: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from iclr26_common.testing import assert_one_line_error

    out = tmp_path / "done"
    out.mkdir()
    (out / "config.json").write_text("{}")
    args = _finetune(tmp_path / "no-model", tmp_path / "no-data.jsonl", out, "--last-k", "1")
    line = assert_one_line_error(main, args, capsys)
    assert f"--out {out}: holds earlier results" in line, line
    new = tmp_path / "new"
    line = assert_one_line_error(
        main, [*_finetune(tmp_path / "m", pairs, new, "--last-k", "1"), "--device", "gpu"], capsys
    )
    assert "--device gpu: not a device" in line and not new.exists()


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ('{"prompt": "a"}\n', ["--last-k", "1"], "ft.jsonl:1: missing field 'answer'"),
        ('{"prompt": "a", "answer": 3}\n', ["--last-k", "1"], "field 'answer' is not a string"),
        (
            '{"prompt": "a", "answer": " "}\n',
            ["--last-k", "1"],
            "ft.jsonl:1: field 'answer' is empty",
        ),
        ("\n", ["--last-k", "1"], "ft.jsonl: no examples"),
        ('{"prompt": "a", "answer": "b"}\n', ["--last-k", "4"], "k = 4: the model has 3 layers"),
        ('{"prompt": "a", "answer": "b"}\n', ["--layers", "3"], "unknown layer 3"),
        (
            '{"prompt": "a", "answer": "b"}\n',
            ["--last-k", "0"],
            "--last-k: expected an integer >= 1",
        ),
        ('{"prompt": "a", "answer": "b"}\n', ["--last-k", "1", "--lr", "nan"], "--lr: expected"),
        ('{"prompt": "a", "answer": "b"}\n', ["--last-k", "1", "--seed", "-1"], "[0, 2**32)"),
        ('{"prompt": "a", "answer": "b"}\n', [], "one of the arguments --last-k --layers"),
        (
            '{"prompt": "repite: la casa es grande =>", "answer": " la casa"}\n',
            ["--last-k", "1", "--max-len", "2"],
            "no answer token fits in --max-len 2",
        ),
    ],
)
def test_finetune_bad_input_is_one_line_and_leaves_no_folder(
    three_layers: Path, tmp_path: Path, capsys, content: str, extra: list[str], message: str
) -> None:  # type: ignore[no-untyped-def]
    from iclr26_common.testing import assert_one_line_error

    data = tmp_path / "ft.jsonl"
    data.write_text(content)
    out = tmp_path / "out"
    line = assert_one_line_error(main, _finetune(three_layers, data, out, *extra), capsys)
    assert message in line, line
    assert not out.exists()


def test_finetune_ctrl_c_leaves_a_partial_folder(
    three_layers: Path, pairs: Path, tmp_path: Path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C while training: one line, exit 130, and the folder never looks complete."""
    from iclr26_common.testing import run_main
    from llm_methods.linguamap import finetune

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(finetune, "selective_finetune", interrupted)
    out = tmp_path / "ft"
    run = run_main(main, _finetune(three_layers, pairs, out, "--last-k", "1"), capsys)
    assert run.code == 130 and run.err.strip() == "llm-methods: interrupted", run.err
    assert not (out / "config.json").exists()


def test_finetune_help_shows_defaults_and_that_out_is_a_folder(capsys) -> None:  # type: ignore[no-untyped-def]
    from iclr26_common.testing import run_main

    run = run_main(main, ["linguamap", "finetune", "--help"], capsys)
    assert run.code == 0
    text = " ".join(run.out.split())
    for default in ("(default: 150)", "(default: 0.002)", "(default: 16)", "(default: 256)"):
        assert default in text, default
    assert "--out OUT output folder" in text
