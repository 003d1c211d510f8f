from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from iclr26_common.testing import assert_cli_help, assert_one_line_error
from llm_methods import __version__
from llm_methods.cli import _method_clis, main
from llm_methods.dispersion.cli import run_lightning_cli as dispersion_lightning_cli


def listed_commands(help_text: str) -> set[str]:
    """The subcommand rows of an argparse help (``    NAME   help``), not words in prose."""
    return set(re.findall(r"^ {4}([a-z][\w-]*)(?: {2,}|$)", help_text, re.MULTILINE))


TOOLS = ["score", "generate", "zoo", "corpora"]


def test_help_lists_every_subcommand() -> None:
    tools = set(TOOLS)
    plugins = {
        "adl",
        "antibody",
        "bed",
        "dispersion",
        "linguamap",
        "ltpo",
        "mas2",
        "mbok",
        "meta_router",
        "perk",
        "remix",
        "seekbench",
        "suit",
    }
    assert listed_commands(assert_cli_help(main)) == tools | plugins  # no boolean/router/...
    out = assert_cli_help(main, ["dispersion", "--help"])
    assert listed_commands(out) == {"fit", "validate", "test", "measure", "configs"}
    assert "representation dispersion (arXiv 2506.24106)" in out
    out = assert_cli_help(main, ["adl", "--help"])
    assert listed_commands(out) == {"diff", "kl"}
    assert "Activation Difference Lens model diffing (arXiv 2510.13900)" in out


def test_every_method_is_discovered_the_same_way() -> None:
    """One registration mechanism: each method (dispersion and adl included) is a discovered
    ``<method>/cli.py`` with ``ABOUT`` and ``main``; the top-level file keeps only the tools,
    listed before the methods (which follow in name order)."""
    found = _method_clis()
    assert {"adl", "dispersion"} <= set(found)
    assert found["dispersion"].ABOUT == "representation dispersion (arXiv 2506.24106)"
    assert found["adl"].ABOUT == "Activation Difference Lens model diffing (arXiv 2510.13900)"
    rows = re.findall(r"^ {4}([a-z][\w-]*)", assert_cli_help(main), re.MULTILINE)
    assert rows == TOOLS + sorted(found)


def test_method_usage_errors_keep_their_messages(capsys: pytest.CaptureFixture) -> None:
    """The moved parsers keep their prog names and checks (exit 2, one line)."""
    line = _one_line_error(capsys, ["dispersion", "bogus"])
    assert "llm-methods dispersion: error:" in line and "invalid choice: 'bogus'" in line
    measure = ["dispersion", "measure", "--out", "o", "--chunk-len", "1"]
    line = _one_line_error(capsys, measure)
    assert line.startswith("llm-methods dispersion measure: error: --chunk-len is too small")
    args = ["--base-model", "a", "--model", "b", "--texts", "t", "--out", "o"]
    line = _one_line_error(capsys, ["adl", "diff", *args, "--positions", "0"])
    assert "llm-methods adl: error: --positions and --top-k must be >= 1" in line
    line = _one_line_error(capsys, ["adl", "kl", *args, "--top", "0"])
    assert "--temperature must be > 0, --top and --max-tokens >= 1" in line
    with pytest.raises(SystemExit) as exit_info:
        main(["dispersion"])
    assert exit_info.value.code == 2 and "usage: llm-methods dispersion" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and __version__ in capsys.readouterr().out


def test_fit_tiny_in_process(tmp_path: Path) -> None:
    cli = dispersion_lightning_cli(
        [
            "fit",
            "--config",
            "tiny",
            "--trainer.fast_dev_run=1",
            f"--trainer.default_root_dir={tmp_path}",
        ]
    )
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    assert cli.model.hparams.vocab_size == cli.datamodule.vocab_size == 300  # linked


def test_fit_cross_domain_on_user_jsonl(tmp_path: Path) -> None:
    rows = [{"text": f"alpha beta gamma delta {i} " * 12, "domain": "greek"} for i in range(6)]
    rows += [{"text": f"one two three four {i} " * 12, "domain": "numbers"} for i in range(6)]
    data = tmp_path / "docs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cli = dispersion_lightning_cli(
        [
            "fit",
            "--config",
            "crossdomain",
            f"--data.init_args.files=[{data}]",
            "--data.init_args.tokenizer=bpe:300",
            "--data.init_args.seq_len=16",
            "--model.init_args.hidden=32",
            "--trainer.fast_dev_run=2",
            f"--trainer.default_root_dir={tmp_path}",
        ]
    )
    assert cli.datamodule.domain_names == ["greek", "numbers"]
    assert cli.trainer.global_step == 2


def _one_line_error(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    return assert_one_line_error(main, args, capsys, prog="llm-methods")


@pytest.fixture(scope="module")
def model_dir(saved_tiny_lm: Any) -> Path:
    texts = ["The quick brown fox jumps over the lazy dog. " * 4, "Lists and tuples. " * 8]
    return saved_tiny_lm("tiny-model", texts * 3, vocab_size=280, n_layers=2, hidden=32, heads=2)


def test_score_a_local_model(model_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["score", "--model", str(model_dir), "--text", "The quick brown fox."]) == 0
    out = capsys.readouterr().out
    assert "log p(text) = -" in out and "2 layers, d=32" in out


def test_measure_writes_tables(model_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(
        "\n".join(json.dumps({"text": "The quick brown fox jumps. " * 30}) for _ in range(4)) + "\n"
    )
    out = tmp_path / "m"
    assert (
        main(
            [
                "dispersion",
                "measure",
                "--model",
                str(model_dir),
                "--input",
                str(data),
                "--out",
                str(out),
                "--chunk-len",
                "16",
                "--bin-size",
                "3",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chunks"] > 9 and -1 <= summary["pearson_r"] <= 1
    lines = (out / "layers.csv").read_text().splitlines()
    assert lines[0] == "hidden_state_index,mean_dispersion" and len(lines) == 1 + 3
    assert (out / "dispersion_vs_ppl.png").stat().st_size > 0


def test_bad_input_is_one_line(model_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"txt": "oops"}\n')
    line = _one_line_error(
        capsys,
        [
            "dispersion",
            "measure",
            "--model",
            str(model_dir),
            "--input",
            str(bad),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert "bad.jsonl:2" in line and "'text'" in line
    line = _one_line_error(capsys, ["score", "--model", "nope", "--text", "x"])
    assert "unknown model spec 'nope'" in line
    line = _one_line_error(capsys, ["score", "--model", str(model_dir), "--text", " "])
    assert "empty" in line
    line = _one_line_error(capsys, ["zoo", "build", "nope"])
    assert "unknown zoo model 'nope'" in line
    line = _one_line_error(capsys, ["frobnicate"])
    assert "unknown command" in line
    line = _one_line_error(
        capsys,
        [
            "dispersion",
            "fit",
            "--config",
            "tiny",
            f"--data.init_args.files=[{tmp_path / 'none.txt'}]",
            f"--trainer.default_root_dir={tmp_path}",  # its empty log folder there, not in the cwd
        ],
    )
    assert "none.txt" in line


def test_zoo_build_list_and_load(tmp_path: Path, monkeypatch, capsys, nano_zoo) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.lm import load_lm
    from llm_methods.zoo import registry

    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path))
    nano_zoo(3)
    assert main(["zoo", "build", "nano"]) == 0
    folder = registry.zoo_dir("nano")
    info = json.loads((folder / "zoo.json").read_text())
    assert info["recipe"]["steps"] == 3 and len(info["losses"]) == 3
    assert folder.parent == tmp_path / "zoo" and folder.name.startswith("nano-")
    main(["zoo", "list"])
    assert "nano" in capsys.readouterr().out
    lm = load_lm("zoo:nano", device="cpu")
    assert lm.n_layers == 1 and lm.hidden_size == 16
    assert registry.build("nano") == folder  # cached: no rebuild
    # the cache folders are readable by others (d875146: safetensors wrote the weights 0600)
    assert all(f.stat().st_mode & 0o777 == 0o644 for f in folder.iterdir())
    # --cache-dir naming a file, or below one: one line naming the option (d875146: "[Errno 17]")
    taken = tmp_path / "f.txt"
    taken.write_text("x")
    for bad in (taken, taken / "x"):
        line = _one_line_error(capsys, ["zoo", "build", "nano", "--cache-dir", str(bad)])
        assert line.startswith(f"llm-methods: error: --cache-dir {bad}:"), line
        assert "Errno" not in line


def test_corpora_lists_licences(capsys: pytest.CaptureFixture) -> None:
    assert main(["corpora"]) == 0
    out = capsys.readouterr().out
    assert "pydoc" in out and "PSF-2.0" in out and "CC-BY-SA-4.0" in out


def test_adl_diff_on_a_pair(model_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    ft_dir = Path(shutil.copytree(model_dir, tmp_path / "ft"))
    model = AutoModelForCausalLM.from_pretrained(ft_dir)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.add_(0.1)
    model.save_pretrained(ft_dir)
    texts = tmp_path / "t.jsonl"
    texts.write_text(
        "\n".join(json.dumps({"text": f"The quick brown fox {i} jumps."}) for i in range(6))
    )
    domain = tmp_path / "d.txt"
    domain.write_text("Lists and tuples. " * 10)
    out = tmp_path / "adl"
    assert (
        main(
            [
                "adl",
                "diff",
                "--base-model",
                str(model_dir),
                "--model",
                str(ft_dir),
                "--texts",
                str(texts),
                "--domain-texts",
                str(domain),
                "--out",
                str(out),
                "--top-k",
                "5",
            ]
        )
        == 0
    )
    result = json.loads((out / "adl.json").read_text())
    assert result["layer"] == 0 and len(result["lens"]) == 5 and len(result["lens"][0]) == 5
    assert len(result["relevance_delta"]) == 5 and set(result["patchscope"]) == {
        "0.5",
        "1.0",
        "2.0",
        "4.0",
    }
    assert "position 0:" in capsys.readouterr().out
    line = _one_line_error(
        capsys,
        [
            "adl",
            "diff",
            "--base-model",
            str(model_dir),
            "--model",
            "zoo:nope",
            "--texts",
            str(texts),
            "--out",
            str(tmp_path / "adl-nope"),
        ],
    )
    assert "unknown zoo model" in line
    assert not (tmp_path / "adl-nope").exists()  # issue 37: no empty folder after a refusal
    toolkit = tmp_path / "toolkit"
    assert (
        main(
            [
                "adl",
                "diff",
                "--base-model",
                str(model_dir),
                "--model",
                str(ft_dir),
                "--texts",
                str(texts),
                "--out",
                str(out),
                "--overwrite",  # issue 37: the earlier adl.json is kept without it
                "--toolkit-dir",
                str(toolkit),
                "--dataset-id",
                "org/mine",
            ]
        )
        == 0
    )
    assert (toolkit / "layer_0" / "mine" / "logit_lens_pos_4.pt").is_file()
    # the toolkit layout's earlier results are found before the activations are computed, in one
    # line naming --toolkit-dir, and kept (d875146: after the work, and no --overwrite reached it)
    before = (toolkit / "layer_0" / "mine" / "mean_pos_0.pt").read_bytes()
    again = ["adl", "diff", "--base-model", str(model_dir), "--model", str(ft_dir)]
    again += ["--texts", str(texts), "--toolkit-dir", str(toolkit), "--dataset-id", "org/mine"]
    capsys.readouterr()
    line = assert_one_line_error(main, [*again, "--out", str(tmp_path / "adl-2")], capsys)
    assert f"--toolkit-dir {toolkit / 'layer_0' / 'mine'}: already holds results" in line, line
    assert "--overwrite" in line and not (tmp_path / "adl-2").exists()
    assert (toolkit / "layer_0" / "mine" / "mean_pos_0.pt").read_bytes() == before
    assert main([*again, "--out", str(tmp_path / "adl-3"), "--overwrite"]) == 0
    assert (
        main(
            [
                "adl",
                "kl",
                "--base-model",
                str(model_dir),
                "--model",
                str(ft_dir),
                "--texts",
                str(texts),
                "--out",
                str(tmp_path / "kl"),
                "--top",
                "3",
            ]
        )
        == 0
    )
    kl = json.loads((tmp_path / "kl" / "kl.json").read_text())
    assert "adl kl batches: 1/1" in capsys.readouterr().err  # issue 37: progress (--quiet: none)
    assert kl["stats"]["mean"] > 0 and len(kl["top_tokens"]) == 3 and len(kl["per_text_mean"]) == 6
    line = _one_line_error(
        capsys,
        [
            "adl",
            "kl",
            "--base-model",
            str(model_dir),
            "--model",
            str(ft_dir),
            "--texts",
            str(texts),
            "--out",
            str(out),
            "--temperature",
            "0",
        ],
    )
    assert "--temperature must be > 0" in line


def test_method_cli_plugins_are_discovered(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A method folder with cli.py (ABOUT + main) becomes `llm-methods <method>` unedited."""
    import sys

    import llm_methods

    package = tmp_path / "fakemethod"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(
        "ABOUT = 'a fake method for the test'\n"
        "def main(argv):\n"
        "    print('fake got', list(argv))\n"
        "    return 0\n"
    )
    monkeypatch.setattr(llm_methods, "__path__", [*llm_methods.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "llm_methods.fakemethod", raising=False)
    monkeypatch.delitem(sys.modules, "llm_methods.fakemethod.cli", raising=False)
    assert main(["fakemethod", "x", "--y"]) == 0
    assert "fake got ['x', '--y']" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "a fake method for the test" in capsys.readouterr().out


_SAVE_A_MODEL = """
import sys
if sys.argv[2] == "entry":
    from llm_methods.cli import main
    main(["corpora"])
from llm_methods.zoo.models import tiny_lm
lm = tiny_lm(["a b c d e f g h. " * 8] * 4, vocab_size=280, n_layers=1, hidden=16, heads=2)
lm.model.save_pretrained(sys.argv[1])
"""


def test_entry_point_turns_transformers_progress_bars_off(tmp_path: Path) -> None:
    """The ``llm-methods`` entry point turns transformers' bars off for every command, also where
    no model is loaded through ``load_lm`` (``save_pretrained``: "Writing model shards", printed
    by ``antibody pretrain --quiet`` on 44537c0), without importing transformers for ``--help``.
    Control: the same save without the entry point prints the bar (the check can fail)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if "PROGRESS" not in k and "VERBOSITY" not in k}

    def stderr_of(mode: str) -> str:
        run = subprocess.run(
            [sys.executable, "-c", _SAVE_A_MODEL, str(tmp_path / mode), mode],
            capture_output=True,
            text=True,
            timeout=300,
            env=env | {"OMP_NUM_THREADS": "1"},
        )
        assert run.returncode == 0, run.stderr
        return run.stderr

    assert "Writing model shards" in stderr_of("plain")  # control: transformers' own bar
    err = stderr_of("entry")
    assert "Writing model shards" not in err and "\r" not in err, err
    assert (tmp_path / "entry" / "config.json").is_file()
