"""``llm-methods mbok``: shipped configs, tiny finetune (fast_dev_run, in process), compress /
eval round trip on a local tiny model, one-line errors."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main
from llm_methods.method_cli import shipped_configs


@pytest.fixture(scope="module")
def model_dir(saved_tiny_lm: Any) -> Path:
    return saved_tiny_lm(
        "tiny-mbok",
        ["The quick brown fox jumps over the lazy dog. " * 6, "Lists and tuples. " * 8] * 3,
        vocab_size=280,
        n_layers=2,
        hidden=32,
        heads=2,
    )


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.mark.parametrize("name", sorted(shipped_configs("mbok")))
def test_shipped_configs_name_real_arguments(name: str) -> None:
    from llm_methods.mbok.lit_module import BooleanDistillModule, BooleanTextDataModule

    cfg = yaml.safe_load(shipped_configs("mbok")[name].read_text())
    model_args = set(inspect.signature(BooleanDistillModule.__init__).parameters)
    data_args = set(inspect.signature(BooleanTextDataModule.__init__).parameters)
    # issue 36: class_path + init_args, as the other LightningCLI commands' configs
    assert cfg["model"]["class_path"].endswith("BooleanDistillModule")
    assert cfg["data"]["class_path"].endswith("BooleanTextDataModule")
    model, data = cfg["model"]["init_args"], cfg["data"]["init_args"]
    assert set(model) <= model_args and set(data) <= data_args
    assert model["method"] in ("mbok", "onebit")
    if model["method"] == "mbok" and name != "tiny":
        assert model["bool_lr"] == 0.01 and model["scale_lr"] == 2e-5
        assert (model["kl_weight"], model["mse_weight"]) == (1.0, 10.0)


def test_tiny_finetune_fast_dev_run_saves_layers(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "tiny.safetensors"
    args = [
        "mbok",
        "finetune",
        "--config",
        "tiny",
        "--trainer.fast_dev_run=1",
        f"--model.init_args.save_to={out}",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    assert main(args) == 0
    assert out.is_file() and "saved 14 compressed layers" in capsys.readouterr().out
    from safetensors import safe_open

    with safe_open(str(out), "pt") as f:
        meta = json.loads(f.metadata()["meta"])
        assert meta["method"] == "mbok" and meta["k"] == 2
        assert f.get_tensor("model.layers.0.mlp.down_proj.packed").shape[0] == 2


def test_compress_then_eval(model_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    text = tmp_path / "t.jsonl"
    text.write_text(
        "".join(json.dumps({"text": "The quick brown fox jumps. " * 20}) + "\n" for _ in range(3))
    )
    out = tmp_path / "c.safetensors"
    args = [
        "mbok",
        "compress",
        "--model",
        str(model_dir),
        "--k",
        "2",
        "--layers",
        "mlp.up_proj",
        "q_proj",
        "--blocks",
        "0-1",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    line = capsys.readouterr().out
    assert "mbok: 4 layers" in line and "bits/weight" in line and out.is_file()
    # issue 37: mode 0644 like any tool's output (11b2942: safetensors' 0600); an existing
    # file is refused before the model is loaded unless --overwrite
    assert out.stat().st_mode & 0o777 == 0o644
    again = [*args[:2], "--model", "no-such-model", *args[4:]]
    line = assert_one_line_error(main, again, capsys)
    assert f"--out {out}: exists; pass --overwrite" in line, line
    fp_out = tmp_path / "fp.json"
    ev = ["mbok", "eval", "--model", str(model_dir), "--text-file", str(text), "--seq-len", "16"]
    assert main([*ev, "--out", str(fp_out)]) == 0
    fp = float(capsys.readouterr().out.split()[1])
    assert json.loads(fp_out.read_text())["perplexity"] == pytest.approx(fp, rel=1e-3)
    assert (
        main(
            [
                "mbok",
                "eval",
                "--model",
                str(model_dir),
                "--text-file",
                str(text),
                "--seq-len",
                "16",
                "--compressed",
                str(out),
                "--out",
                str(tmp_path / "ppl.json"),
            ]
        )
        == 0
    )
    res = capsys.readouterr().out
    assert "4 mbok layers" in res and float(res.split()[1]) != fp


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["compress", "--k", "0", "--out", "x.safetensors"], "K must be >= 1, got 0"),
        (
            ["compress", "--layers", "foo_proj", "--out", "x.safetensors"],
            "unknown layer name 'foo_proj'",
        ),
        (["compress", "--blocks", "9", "--out", "x.safetensors"], "block 9 out of range"),
        (
            ["eval", "--text-file", "missing.txt", "--out", "p.json"],
            "missing.txt: no such text file",
        ),
        (
            ["eval", "--compressed", "missing.safetensors", "--out", "p.json"],
            "missing.safetensors: no such compressed-model file",
        ),
    ],
)
def test_bad_input_one_line(
    model_dir: Path, tmp_path: Path, capsys, extra: list[str], needle: str
) -> None:  # type: ignore[no-untyped-def]
    args = [
        "mbok",
        *[str(tmp_path / a) if a.endswith((".txt", ".safetensors", ".json")) else a for a in extra],
    ]
    args += ["--model", str(model_dir)]
    line = _one_line_error(capsys, args)
    assert line.startswith("llm-methods: error:") and needle in line


def test_bad_jsonl_names_line_and_field(model_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"txt": "no"}\n')
    out = tmp_path / "p.json"
    args = ["mbok", "eval", "--model", str(model_dir), "--text-file", str(bad), "--out", str(out)]
    line = _one_line_error(capsys, args)
    assert "bad.jsonl:2: field 'text'" in line
    assert not out.exists()


def test_finetune_k0_is_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    line = _one_line_error(
        capsys,
        [
            "mbok",
            "finetune",
            "--config",
            "tiny",
            "--model.init_args.k=0",
            "--trainer.fast_dev_run=1",
        ],
    )
    assert "K must be >= 1" in line


def _text(tmp_path: Path) -> Path:
    text = tmp_path / "t.jsonl"
    text.write_text(
        "".join(json.dumps({"text": "The quick brown fox jumps. " * 20}) + "\n" for _ in range(3))
    )
    return text


def test_eval_writes_out_with_device_seed_and_progress(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``eval`` writes its result to ``--out`` (one JSON file, checked before the model is
    loaded), takes ``--device`` / ``--seed``, shows progress unless ``--quiet``, and reads the
    text from ``--text-file`` (fails on d9942d3: stdout only; ``--out``, ``--device``,
    ``--seed``, ``--quiet``, ``--text-file`` unknown)."""
    from iclr26_common.testing import run_main

    out = tmp_path / "ppl.json"
    args = ["mbok", "eval", "--model", str(model_dir), "--text-file", str(_text(tmp_path))]
    args += ["--seq-len", "16", "--batch-size", "1", "--device", "cpu", "--seed", "3"]
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 0, run.err
    saved = json.loads(out.read_text())
    assert saved["perplexity"] == pytest.approx(float(run.out.split()[1]), rel=1e-3)
    assert saved["device"] == "cpu" and saved["seed"] == 3 and saved["chunks"] >= 2
    assert "mbok eval batches:" in run.err and "(done)" in run.err, run.err
    again = [*args[:2], "--model", "no-such-model", *args[4:], "--out", str(out)]
    line = assert_one_line_error(main, again, capsys)
    assert f"--out {out}: exists; pass --overwrite" in line, line
    run = run_main(main, [*args, "--out", str(out), "--overwrite", "--quiet"], capsys)
    assert run.code == 0 and "batches" not in run.err, run.err
    gpu = [*args[:-4], "--device", "gpu", "--out", str(tmp_path / "gpu.json")]
    line = assert_one_line_error(main, gpu, capsys)
    assert "--device gpu: not a device" in line, line
    assert not (tmp_path / "gpu.json").exists()


def test_compress_takes_device_and_seed(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``compress --device cpu --seed 0`` (fails on d9942d3: both unknown); a bad device is one
    line naming ``--device``, before the model is loaded."""
    out = tmp_path / "c.safetensors"
    args = ["mbok", "compress", "--model", str(model_dir), "--layers", "q_proj", "--out", str(out)]
    assert main([*args, "--device", "cpu", "--seed", "0"]) == 0 and out.is_file()
    line = assert_one_line_error(
        main, [*args, "--overwrite", "--device", "gpu"], capsys, drop_earlier=True
    )
    assert "--device gpu: not a device" in line, line


def test_eval_text_removed_in_0_8_0_is_refused_and_finetune_model_x_is_the_shorthand(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``eval --text FILE`` (a file; ``--text`` is a literal string in ``llm-methods score``) is
    ``--text-file`` since 0.7.0; the old spelling warned in 0.7.0 and is removed in 0.8.0: refused
    in one line naming ``--text-file``, exit 2, before the model is loaded, and not read as an
    abbreviation of ``--text-file``. ``finetune --model.X`` no longer warns: it is jsonargparse's
    shorthand of ``--model.init_args.X``, which every LightningCLI command takes (``K must be >=
    1`` shows it reached the module)."""
    from iclr26_common.testing import run_main

    text = tmp_path / "t.txt"
    text.write_text("Some text to score.")
    out = tmp_path / "r.json"
    args = ["mbok", "eval", "--model", str(model_dir), "--text", str(text), "--out", str(out)]
    line = assert_one_line_error(main, args, capsys)
    assert "mbok eval --text: removed in llm-methods 0.8.0; use --text-file" in line, line
    assert not out.exists()
    run = run_main(main, ["mbok", "finetune", "--config", "tiny", "--model.k=0"], capsys)
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert run.code == 2 and len(lines) == 1 and "K must be >= 1" in lines[0], run.err
    assert "deprecated" not in run.err


def test_eval_ctrl_c_is_one_line_exit_130(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while ``eval`` scores: one line, exit status 130, no ``--out`` file (a guard for
    the new ``--out``)."""
    from iclr26_common.testing import run_main
    from llm_methods.mbok import distill

    def interrupted(*args: object, **kwargs: object) -> float:
        raise KeyboardInterrupt

    monkeypatch.setattr(distill, "perplexity_of", interrupted)
    monkeypatch.delenv("LLM_METHODS_TRACEBACK", raising=False)
    out = tmp_path / "ppl.json"
    args = ["mbok", "eval", "--model", str(model_dir), "--text-file", str(_text(tmp_path))]
    run = run_main(main, [*args, "--seq-len", "16", "--out", str(out)], capsys)
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert run.code == 130 and lines == ["llm-methods: interrupted"], run.err
    assert not out.exists()


def test_eval_without_out_is_refused_before_the_model_is_loaded(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No result only on stdout (issue 36): ``eval`` without ``--out`` is one line naming it,
    exit 2, before the model is loaded, and ``--help`` says what the file holds (fails on
    34583c8: ``--out`` was optional, "default: stdout only", and the perplexity was only
    printed)."""
    import llm_methods.lm
    from iclr26_common.testing import run_main

    def not_loaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(llm_methods.lm, "load_lm", not_loaded)
    args = ["mbok", "eval", "--model", str(model_dir), "--text-file", str(_text(tmp_path))]
    line = assert_one_line_error(main, [*args, "--seq-len", "16"], capsys)
    assert "the following arguments are required: --out" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]
    run = run_main(main, ["mbok", "eval", "--help"], capsys)
    entry = " ".join(run.out[run.out.index("\n  --out OUT") :].split())
    assert run.code == 0 and entry.startswith("--out OUT output .json file"), run.out
    assert "perplexity printed" in entry and "stdout only" not in run.out, run.out


@pytest.mark.parametrize(
    ("flag", "what"), [("--text-file", "text file"), ("--compressed", "compressed-model file")]
)
def test_eval_names_a_folder_given_as_a_file(
    flag: str, what: str, model_dir: Path, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """``mbok eval --text-file DIR`` / ``--compressed DIR``: one line "DIR: is a folder; give a
    ..." (fails on 44537c0: "text file not found" / "compressed-model file not found" for a
    folder that exists), before the model is loaded; nothing written."""
    folder = tmp_path / "given"
    folder.mkdir()
    out = tmp_path / "p.json"
    args = ["mbok", "eval", "--model", str(model_dir), flag, str(folder), "--out", str(out)]
    line = _one_line_error(capsys, args)
    assert f"{folder}: is a folder; give a {what}" in line, line
    assert not out.exists()
