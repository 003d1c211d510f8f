from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
import yaml

from bio_scisor.cli import main, run_lightning_cli
from iclr26_common.testing import (
    CliContract,
    assert_one_line_error,
    fast_dev_args,
    only_file,
    run_ddp,
    run_main,
    shipped_configs,
)

from .conftest import cli_args

CONFIGS = shipped_configs("bio_scisor")


class TestCliContract(CliContract):
    package = "bio_scisor"
    lightning = ("fit", "validate", "test")
    commands = ("score", "proteingym", "shrink", "synth", "configs")
    commands_with_help = ("score", "proteingym", "shrink", "synth")

    def check_config(self, printed: dict, declared: dict) -> None:
        for key, value in declared["model"].items():
            assert printed["model"][key] == value
        assert printed["data"]["synthetic"] == declared["data"]["synthetic"]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_fits_and_tests(
    config: Path, tiny_esm_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every shipped config through ``main``: ``fit`` with ``fast_dev_run``, then ``test``.
    Overrides are sizes only: 40 synthetic sequences, and for esm2_t12_35M a tiny random ESM2
    folder as ``model.esm_path`` (the config names the real one, which is not shipped)."""
    args = [
        "--config",
        str(config),
        "--trainer.fast_dev_run=true",
        "--data.n_synthetic=40",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    if yaml.safe_load(config.read_text())["model"].get("backbone") == "esm":
        args.append(f"--model.esm_path={tiny_esm_dir}")
    for command in ("fit", "test"):
        run = run_main(main, [command, *args], capsys, cwd=tmp_path)
        assert run.code == 0, f"{command}: {run.err[-2000:]}"
    assert "test/loss" in run.out and "test/prior_kl" in run.out


def test_fit_tiny_in_process(tmp_path: Path) -> None:
    cli = run_lightning_cli(fast_dev_args(tmp_path))
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    assert cli.model.hparams.d_model == 16 and len(cli.model.hparams.background) == 20


def test_fit_without_logger_keeps_the_users_config_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`fit --config tiny --trainer.logger=false` overwrote ./config.yaml (overwrite=True); without
    a logger or a --trainer.default_root_dir the config now lands nowhere (common 0.8), with one
    beside the user's file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text("mine: 1\n")
    run = run_main(main, ["fit", "--config", "tiny", "--trainer.logger=false"], capsys)
    assert run.code == 0, run.err
    assert (tmp_path / "config.yaml").read_text() == "mine: 1\n"
    assert sorted(p.name for p in tmp_path.glob("config*.yaml")) == ["config.yaml"]
    root = ["--trainer.default_root_dir", str(tmp_path)]
    run = run_main(main, ["fit", "--config", "tiny", "--trainer.logger=false", *root], capsys)
    assert run.code == 0, run.err
    assert (tmp_path / "config.yaml").read_text() == "mine: 1\n"
    assert yaml.safe_load((tmp_path / "config-1.yaml").read_text())["model"]["d_model"] == 16


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["fit", "--config", "nosuch.yaml"], "shipped: esm2_t12_35M, scisor, tiny"),
        (["fit", "-c", "tiny", "--model.d_model", "x"], 'fit: Parser key "model.d_model"'),
        (["fit", "-c", "tiny", "--data.batch_size", "0"], "batch_size must be >= 1, got 0"),
    ],
)
def test_fit_input_errors_are_one_line(
    capsys: pytest.CaptureFixture, args: list[str], expected: str
) -> None:
    line = assert_one_line_error(main, args, capsys, prog="bio-scisor: error: ")
    assert expected in line


@pytest.mark.slow
def test_fit_tiny_under_ddp_on_two_cpu_processes(tmp_path: Path) -> None:
    # two processes, no sync_dist warning: val/test epoch means are reduced over the ranks
    run_ddp("bio-scisor", ["fit", "--config", "tiny"], tmp_path)
    # rank 0 alone writes one config and one checkpoint
    config = only_file(tmp_path, "config*.yaml")
    assert config.relative_to(tmp_path).as_posix() == "lightning_logs/version_0/config.yaml"
    assert only_file(tmp_path, "*.ckpt").parent.parent == config.parent


def test_synth_score_shrink_round_trip(tmp_path: Path, tiny_ckpt: Path, capsys) -> None:
    data = tmp_path / "syn"
    assert main(["synth", "--out", str(data), "--n", "30", "--n-multi", "6", "--seed", "2"]) == 0
    out = tmp_path / "scores.csv"
    args = [
        "score",
        "--dms",
        str(data / "SYNTH_deletions.csv"),
        "--wt",
        str(data / "wt.fasta"),
        "--ckpt",
        str(tiny_ckpt),
        "--out",
        str(out),
        "--elbo-samples",
        "1",
    ]
    assert main(args) == 0
    rows = list(csv.DictReader(out.open()))
    assert set(rows[0]) == {
        "mutated_sequence",
        "DMS_score",
        "DMS_score_bin",  # every input column is kept (issue 37)
        "n_deleted",
        "scisor_path",
        "scisor_elbo",
    }
    assert all(float(r["scisor_path"]) <= 0 for r in rows)  # log-probabilities
    printed = capsys.readouterr().out
    assert "Spearman" in printed
    # a 95 % interval over the variants beside each method, and their paired difference
    lines = {line.split(":")[0]: line for line in printed.splitlines() if "Spearman" in line}
    n = len(rows)
    for name in ("scisor_path", "scisor_elbo", "scisor_elbo - scisor_path"):
        assert "95 %" in lines[name] and f"n={n} variants" in lines[name], lines[name]
        assert "± 0" not in lines[name]
    with pytest.raises(SystemExit) as info:  # no silent overwrite
        main(args)
    assert info.value.code == 2
    shrunk = tmp_path / "shrunk.fasta"
    args = cli_args(
        "shrink", fasta=data / "family.fasta", pct=10, ckpt=tiny_ckpt, out=shrunk, temperature=0
    )
    assert main(args) == 0
    from bio_scisor.io import read_sequences

    before = read_sequences(data / "family.fasta")
    after = read_sequences(shrunk)
    assert len(after) == len(before)
    assert all(
        len(b) == len(a) - -(-len(a) // 10) for (_, a), (_, b) in zip(before, after, strict=True)
    )


def test_shrink_keeps_the_header_and_lists_the_deletions(tmp_path: Path, tiny_ckpt: Path) -> None:
    """Issue 25: upstream writes 'HEADER|deletions A3,G10|percentage 10'; we dropped both."""
    from bio_scisor.io import read_sequences

    seqs = {"p1 kinase domain [Homo sapiens]": "MKTAYIAKQRQISFVKSHFSRQ", "p2": "ACDEFGHIKLMN"}
    (tmp_path / "in.fasta").write_text("".join(f">{h}\n{s}\n" for h, s in seqs.items()))
    out = tmp_path / "out.fasta"
    assert (
        main(cli_args("shrink", fasta=tmp_path / "in.fasta", pct=20, ckpt=tiny_ckpt, out=out)) == 0
    )
    records = read_sequences(out, header=True)
    for (header, seq), (name, shrunk) in zip(seqs.items(), records, strict=True):
        assert name.startswith(f"{header}|deletions ") and name.endswith("|percentage 20")
        listed = name.split("|deletions ")[1].split("|")[0].split(",")
        positions = [int(item[1:]) for item in listed]
        assert len(positions) == -(-len(seq) * 20 // 100)
        assert all(seq[i] == item[0] for i, item in zip(positions, listed, strict=True))
        assert "".join(c for i, c in enumerate(seq) if i not in positions) == shrunk


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("mutated_sequence,DMS_score\nMKTAZ,1\n", "is not one of the 20 standard residues"),
        ("sequence,DMS_score\nMKTA,1\n", "missing column"),
        ("mutated_sequence,DMS_score\nMKTAYW,1\n", "not a deletion of the wild type"),
        # issue 36: a non-UTF-8 byte was a 33-line UnicodeDecodeError traceback
        (
            b"mutated_sequence,DMS_score\nMKTAY\xffIAK,1.0\n",
            "not UTF-8 text (byte 0xff at offset 32)",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, tiny_ckpt, capsys, body, message) -> None:
    dms = tmp_path / "bad.csv"
    dms.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(SystemExit) as info:
        main(cli_args("score", dms=dms, wt="MKTAY", ckpt=tiny_ckpt, out=tmp_path / "o.csv"))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("bio-scisor: error: ") and message in err and "bad.csv" in err
    assert "Traceback" not in err and not (tmp_path / "o.csv").exists()


def test_bad_wt_and_missing_checkpoint(tmp_path, tiny_ckpt, capsys) -> None:
    """An unreadable checkpoint was torch's unpickling traceback; now one line naming it."""
    dms = tmp_path / "a.csv"
    dms.write_text("mutated_sequence,DMS_score\nMKT,1\n")
    (tmp_path / "junk.ckpt").write_text("not a checkpoint\n")
    torch.save({"state_dict": {}}, tmp_path / "bare.ckpt")
    # another model's Lightning checkpoint (issue 29 review: a TypeError traceback)
    other = {"hyper_parameters": {"horizon": 4}, "state_dict": {"w": torch.zeros(2)}}
    torch.save(other, tmp_path / "other.ckpt")
    for wt, ckpt, message in [
        ("MK1TA", tiny_ckpt, "--wt"),
        ("MKTA", tmp_path / "no.ckpt", "no.ckpt: no such checkpoint"),
        ("MKTA", tmp_path / "junk.ckpt", "junk.ckpt: not a readable checkpoint"),
        ("MKTA", tmp_path / "bare.ckpt", "bare.ckpt: not a bio-scisor Lightning checkpoint"),
        ("MKTA", tmp_path / "other.ckpt", "other.ckpt: not a bio-scisor Lightning checkpoint"),
    ]:
        with pytest.raises(SystemExit) as info:
            main(cli_args("score", dms=dms, wt=wt, ckpt=ckpt, out=tmp_path / "o.csv"))
        err = capsys.readouterr().err
        assert info.value.code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["score", "proteingym"])
def test_checkpoint_errors_name_the_option(
    tmp_path: Path, synth_dir: Path, tiny_ckpt: Path, capsys, command: str
) -> None:
    """A missing or truncated ``--ckpt`` is one line that starts with the option, as
    ``--ckpt_path``'s do (the review of issue 36: ``bio-scisor: error: PATH: no such
    checkpoint`` named the file only)."""
    truncated = tmp_path / "cut.ckpt"
    truncated.write_bytes(tiny_ckpt.read_bytes()[:200])
    for ckpt, says in (
        (tmp_path / "no.ckpt", "no such checkpoint"),
        (truncated, "not a readable checkpoint"),
    ):
        if command == "score":
            dms = tmp_path / "a.csv"
            dms.write_text("mutated_sequence,DMS_score\nMKT,1\n")
            args = cli_args(command, dms=dms, wt="MKTA", ckpt=ckpt, out=tmp_path / "o.csv")
        else:
            reference = synth_dir / "DMS_indels.csv"
            args = cli_args(
                command, reference=reference, dms_dir=synth_dir, ckpt=ckpt, out=tmp_path / "o"
            )
        line = assert_one_line_error(main, args, capsys, prog="bio-scisor: error: ")
        assert line.startswith(f"bio-scisor: error: --ckpt {ckpt}: {says}"), line
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "o").exists()


def test_proteingym_reference_scoring(tmp_path: Path, synth_dir: Path, tiny_ckpt, capsys) -> None:
    out = tmp_path / "pg"
    args = cli_args(
        "proteingym",
        reference=synth_dir / "DMS_indels.csv",
        dms_dir=synth_dir,
        ckpt=tiny_ckpt,
        out=out,
        n_resamples=499,
    )
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "single" in printed and "multi" in printed and "1 assays" in printed
    # one protein: the split averages are printed without an interval, saying n
    assert printed.count("(n=1 proteins, too few for an interval)") == 3
    assert "± 0.000" not in printed  # ProteinGym's SE of one protein is 0: not printed
    (row,) = list(csv.DictReader((out / "summary.csv").open()))
    assert row["DMS_id"] == "SYNTH_deletions" and -1 <= float(row["spearman"]) <= 1
    assert (out / "SYNTH_deletions.csv").is_file()
    # the assay's Spearman with its interval over the variants (existing columns unchanged)
    head = ["DMS_id", "UniProt_ID", "coarse_selection_type", "n", "skipped", "spearman"]
    assert list(row)[:6] == head
    assert row["spearman_ci_method"] == "bootstrap" and row["spearman_n"] == row["n"]
    assert row["spearman_resample_seed"] == "0"
    assert float(row["spearman_low"]) <= float(row["spearman"]) <= float(row["spearman_high"])
    splits = json.loads((out / "summary.json").read_text())
    assert set(splits) == {"all", "single", "multi"}
    assert splits["all"]["spearman_interval"] is None and splits["all"]["spearman_interval_n"] == 1
    assert splits["all"]["spearman"] == pytest.approx(float(row["spearman"]), abs=1e-9)
    with pytest.raises(SystemExit) as info:  # existing output folder
        main(args)
    assert info.value.code == 2
