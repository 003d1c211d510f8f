from __future__ import annotations

import json

import pytest

from llm_methods.cli import main


def test_suit_help_and_synth(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exit_:
        main(["suit", "--help"])
    assert exit_.value.code == 0
    assert "usage: llm-methods suit [-h] {edit,facts,trace,synth}" in capsys.readouterr().out
    out = tmp_path / "world.json"
    assert main(["suit", "synth", "--subjects", "5", "--out", str(out)]) == 0
    assert len(json.loads(out.read_text())) == 15


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"prompt": "The capital of Kalo is"}, "must contain exactly one '{}'"),
        ({"subject": ""}, "subject is empty"),
    ],
)
def test_suit_edit_bad_requests_one_line_exit_2(tmp_path, capsys, record, match) -> None:  # type: ignore[no-untyped-def]
    rw = {
        "prompt": "The capital of {} is",
        "subject": "Kalo",
        "target_new": {"str": " Paris"},
        "target_true": {"str": " Rome"},
    }
    rw.update(record)
    path = tmp_path / "req.json"
    path.write_text(json.dumps([{"case_id": 0, "requested_rewrite": rw}]))
    with pytest.raises(SystemExit) as exit_:
        main(["suit", "edit", "--requests", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and match in err[0] and "req.json" in err[0]
    assert not (tmp_path / "o").exists()


def test_suit_edit_bad_layers_and_zsre_subject(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "z.json"
    path.write_text(
        json.dumps(
            [
                {
                    "subject": "Zorb",
                    "src": "What is the capital of Kalo?",
                    "alt": "Paris",
                    "answers": ["Rome"],
                }
            ]
        )
    )
    with pytest.raises(SystemExit) as exit_:
        main(["suit", "edit", "--requests", str(path), "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2 and "does not occur in src" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["suit", "edit", "--requests", str(path), "--layers", "a,b", "--out", str(tmp_path)])
    assert exit_.value.code == 2


def test_suit_trace_and_rome_layer_bad_input(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "world.json"
    main(["suit", "synth", "--subjects", "2", "--out", str(path)])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["suit", "trace", "--requests", str(path), "--facts", "0", "--out", "t.json"])
    assert exit_.value.code == 2 and "--facts and --samples must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(
            ["suit", "edit", "--requests", str(path), "--rome-layer", "top", "--out", str(tmp_path)]
        )
    assert exit_.value.code == 2 and "--rome-layer" in capsys.readouterr().err


@pytest.mark.slow
def test_suit_trace_on_smollm2(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.suit.data import read_counterfact, write_counterfact
    from llm_methods.suit.experiment import FACTS

    reqs = write_counterfact(read_counterfact(FACTS)[:2], tmp_path / "two.json")
    args = ["suit", "trace", "--requests", str(reqs), "--samples", "2", "--device", "cpu"]
    assert main([*args, "--out", str(tmp_path / "trace.json")]) == 0
    out = capsys.readouterr().out
    assert "ROME layer (max AIE, not the last):" in out and out.count("  AIE ") == 30


@pytest.mark.slow
def test_suit_edit_on_smollm2_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from safetensors.torch import load_file

    from llm_methods.suit.data import read_counterfact, write_counterfact
    from llm_methods.suit.experiment import FACTS

    reqs = write_counterfact(read_counterfact(FACTS)[:1], tmp_path / "one.json")
    code = main(
        [
            "suit",
            "edit",
            "--requests",
            str(reqs),
            "--method",
            "memit",
            "--steps",
            "4",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    report = json.loads((tmp_path / "o" / "edit.json").read_text())
    assert code == 0 and report["before"]["efficacy"] == 0.0
    # HF parameter names (issue 41)
    assert set(load_file(str(tmp_path / "o" / "edited_weights.safetensors"))) == {
        f"model.layers.{i}.mlp.down_proj.weight" for i in report["layers"]
    }
    assert [row["case_id"] for row in report["requests"]] == [0]
    # issue 37: ordinary 0644 files (11b2942: safetensors' 0600) and no partial marker left
    for name in ("edit.json", "edited_weights.safetensors"):
        assert (tmp_path / "o" / name).stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "edit.json",
        "edited_weights.safetensors",
    ]


@pytest.mark.slow
def test_suit_experiment_quick(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.suit.experiment import run

    result = run(quick=True, out_dir=tmp_path)
    assert len(result.claims) == 2 and (tmp_path / "suit_sequential.png").is_file()
    # issue 40: the timed run edits with AlphaEdit and SUIT only (ROME and MEMIT out)
    assert set(result.metrics["final"]) == {"alphaedit", "suit"}
    assert result.metrics["edit_counts"] == [1]
