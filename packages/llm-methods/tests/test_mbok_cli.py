"""``llm-methods mbok``: shipped configs, tiny finetune (fast_dev_run, in process), compress /
eval round trip on a local tiny model, one-line errors."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import yaml

from iclr26_common.testing import assert_one_line_error
from llm_methods.cli import main
from llm_methods.method_cli import shipped_configs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(
        ["The quick brown fox jumps over the lazy dog. " * 6, "Lists and tuples. " * 8] * 3,
        vocab_size=280,
        n_layers=2,
        hidden=32,
        heads=2,
    )
    folder = tmp_path_factory.mktemp("tiny-mbok")
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys)


@pytest.mark.parametrize("name", sorted(shipped_configs("mbok")))
def test_shipped_configs_name_real_arguments(name: str) -> None:
    from llm_methods.mbok.lit_module import BooleanDistillModule, BooleanTextDataModule

    cfg = yaml.safe_load(shipped_configs("mbok")[name].read_text())
    model_args = set(inspect.signature(BooleanDistillModule.__init__).parameters)
    data_args = set(inspect.signature(BooleanTextDataModule.__init__).parameters)
    assert set(cfg["model"]) <= model_args and set(cfg.get("data", {})) <= data_args
    assert cfg["model"]["method"] in ("mbok", "onebit")
    if cfg["model"]["method"] == "mbok" and name != "tiny":
        assert cfg["model"]["bool_lr"] == 0.01 and cfg["model"]["scale_lr"] == 2e-5
        assert (cfg["model"]["kl_weight"], cfg["model"]["mse_weight"]) == (1.0, 10.0)


def test_tiny_finetune_fast_dev_run_saves_layers(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "tiny.safetensors"
    args = [
        "mbok",
        "finetune",
        "--config",
        "tiny",
        "--trainer.fast_dev_run=1",
        f"--model.save_to={out}",
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
    assert (
        main(["mbok", "eval", "--model", str(model_dir), "--text", str(text), "--seq-len", "16"])
        == 0
    )
    fp = float(capsys.readouterr().out.split()[1])
    assert (
        main(
            [
                "mbok",
                "eval",
                "--model",
                str(model_dir),
                "--text",
                str(text),
                "--seq-len",
                "16",
                "--compressed",
                str(out),
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
        (["eval", "--text", "missing.txt"], "missing.txt: text file not found"),
        (
            ["eval", "--compressed", "missing.safetensors"],
            "missing.safetensors: compressed-model file not found",
        ),
    ],
)
def test_bad_input_one_line(
    model_dir: Path, tmp_path: Path, capsys, extra: list[str], needle: str
) -> None:  # type: ignore[no-untyped-def]
    args = [
        "mbok",
        *[str(tmp_path / a) if a.endswith((".txt", ".safetensors")) else a for a in extra],
    ]
    args += ["--model", str(model_dir)]
    line = _one_line_error(capsys, args)
    assert line.startswith("llm-methods: error:") and needle in line


def test_bad_jsonl_names_line_and_field(model_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"txt": "no"}\n')
    line = _one_line_error(capsys, ["mbok", "eval", "--model", str(model_dir), "--text", str(bad)])
    assert "bad.jsonl:2: field 'text'" in line


def test_finetune_k0_is_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    line = _one_line_error(
        capsys, ["mbok", "finetune", "--config", "tiny", "--model.k=0", "--trainer.fast_dev_run=1"]
    )
    assert "K must be >= 1" in line
