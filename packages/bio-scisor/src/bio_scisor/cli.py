"""The ``bio-scisor`` command: LightningCLI training subcommands plus score, shrink and synth."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bio_scisor import __version__
from iclr26_common.cli_support import (
    CONFIGS_HELP,
    ArgumentParser,
    ConsoleScript,
    UsageError,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
)
from iclr26_common.outputs import add_output_options, check_out_file, check_output_options
from iclr26_common.progress import add_quiet_option

__all__ = ["main", "run_lightning_cli"]

PROG = "bio-scisor"
TRAINER_SUBCOMMANDS = ("fit", "validate", "test")
DESCRIPTION = (
    "SCISOR (ICLR 2026): a discrete diffusion model that deletes residues, for scoring deletion "
    "variants and shrinking proteins. Training subcommands are LightningCLI (`bio-scisor fit "
    "--help`); shipped configs can be named without a path: `bio-scisor fit --config tiny`."
)


def run_lightning_cli(argv: Sequence[str]) -> Any:
    """LightningCLI(ScisorLitModule, ScisorDataModule) on ``argv`` through the workspace's
    :func:`iclr26_common.lightning.run_cli`; returns the CLI object."""
    from bio_scisor.data import ScisorDataModule
    from bio_scisor.lit_module import ScisorLitModule
    from iclr26_common.lightning import run_cli

    return run_cli(
        ScisorLitModule,
        ScisorDataModule,
        argv,
        package="bio_scisor",
        prog=PROG,
        subclass_mode=False,
    )


COMMANDS = {
    "score": "score the deletion variants of a ProteinGym indel CSV",
    "proteingym": "score every assay of a DMS_indels.csv (or clinical_indels.csv) reference",
    "shrink": "shrink the sequences of a FASTA file by a percentage",
    "synth": "write a synthetic profile-HMM family and deletion assay",
    "configs": CONFIGS_HELP,
}


#: Suffixes that make a ``--wt`` value a file name rather than a residue string.
WT_FILE_SUFFIXES = (".fasta", ".fa", ".faa", ".fas", ".fna", ".txt")


def _read_wt(text: str, record_id: str | None = None) -> str:
    """``--wt``: a residue string or a FASTA file holding the wild type: its one record, or the
    record ``record_id`` (``--wt-id``) names. A FASTA with several records and no ``--wt-id`` is
    refused naming the file and the record count (never the first silently). A value that looks
    like a path (a path separator, or a FASTA suffix such as ``.fasta``/``.fa``) but names no
    file is an error naming the option, never read as a sequence."""
    from bio_scisor.io import check_sequence, read_sequences

    path = Path(text)
    if path.is_dir():  # an existing folder is never a residue string
        raise UsageError(f"--wt {text}: is a folder (give a FASTA file or the wild-type residues)")
    if path.is_file():
        records = read_sequences(text, "fasta")
        ids = [name for name, _ in records]
        if record_id is not None:
            chosen = [seq for name, seq in records if name == record_id]
            if not chosen:
                raise UsageError(
                    f"--wt-id {record_id}: no such record in --wt {text} (its ids: "
                    f"{', '.join(ids[:10])}{', ...' if len(ids) > 10 else ''})"
                )
            if len(chosen) > 1:
                raise UsageError(f"--wt-id {record_id}: {len(chosen)} records of --wt {text}")
            return chosen[0]
        if len(records) > 1:
            raise UsageError(
                f"--wt {text}: {len(records)} records, expected one wild type; choose one with "
                f"--wt-id (its ids: {', '.join(ids[:10])}{', ...' if len(ids) > 10 else ''})"
            )
        return records[0][1]
    if record_id is not None:
        raise UsageError(f"--wt-id {record_id}: needs --wt to be a FASTA file, got residues")
    separators = {"/", os.sep, *([os.altsep] if os.altsep else [])}
    if any(sep in text for sep in separators) or path.suffix.lower() in WT_FILE_SUFFIXES:
        what = "is a folder" if path.is_dir() else "no such file"
        raise UsageError(
            f"--wt {text}: {what} (give a FASTA file or the wild-type residues, e.g. MKTAYIAK)"
        )
    return check_sequence(text.strip().upper(), "--wt")


def _add_ckpt_arguments(parser: ArgumentParser) -> None:
    parser.add_argument(
        "--ckpt",
        type=Path,
        required=True,
        help="bio-scisor checkpoint, or a released upstream SCISOR checkpoint (SCISOR_U90_S.ckpt)",
    )
    parser.add_argument(
        "--esm-config",
        type=Path,
        default=None,
        help="upstream checkpoints only: an ESM2 config.json when the model name is not a "
        "released ESM2",
    )
    parser.add_argument(
        "--p0",
        type=Path,
        default=None,
        help="upstream checkpoints only: upstream's p0.pt (the residue distribution pi they were "
        "trained with; not shipped here, the upstream repository has no licence); required with "
        "--elbo-samples",
    )


def _load_denoiser(
    ckpt: Path, esm_config: Path | None, p0: Path | None = None
) -> tuple[Any, dict[str, Any]]:
    """(denoiser, forward-process settings {alpha_power, t_max, background, official}) from our
    checkpoint (π stored in it) or from upstream's layout (:mod:`bio_scisor.official`; π =
    upstream's ``p0`` read from ``p0``, ``None`` when not given)."""
    from bio_scisor.io import ScisorFormatError
    from bio_scisor.official import is_official_state_dict, load_official_checkpoint, load_p0
    from iclr26_common.checkpoints import load_weights_only

    if ckpt.is_file():
        try:
            payload = load_weights_only(ckpt, error=ScisorFormatError)
        except ScisorFormatError:  # load_checkpoint below names the problem
            payload = None
        state = payload.get("state_dict", {}) if isinstance(payload, dict) else {}
        if is_official_state_dict(state):
            model, settings = load_official_checkpoint(ckpt, esm_config)
            background = load_p0(p0) if p0 is not None else None
            return model, {
                "alpha_power": settings["alpha_power"],
                "t_max": settings["t_max"],
                "background": background,
                "official": True,
            }
    if p0 is not None:
        raise UsageError(f"--p0 is for upstream checkpoints; {ckpt} stores its own pi")
    from bio_scisor.lit_module import load_checkpoint

    module = load_checkpoint(ckpt, option="--ckpt")  # errors start with the option
    hp = module.hparams
    return module.denoiser, {
        "alpha_power": hp.alpha_power,
        "t_max": hp.t_max,
        "background": module.background.cpu(),
        "official": False,
    }


def _add_quiet(parser: ArgumentParser, progress: str) -> None:
    """``--quiet``: no progress lines over ``progress``."""
    add_quiet_option(parser, also=f"(progress over {progress})")


NO_SPEARMAN_INTERVAL = "no interval: under 10 variants, or constant scores"


def score_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="bio-scisor score",
        description="Score every deletion variant of a ProteinGym indel CSV with a trained "
        "checkpoint and write every column of the CSV (ids such as mutant first), n_deleted, "
        "scisor_path[, scisor_elbo]; rows skipped (--skip-non-deletions, --skip-nonstandard) "
        "are counted and listed in OUT_STEM.skipped.csv. "
        "Prints the Spearman correlation with DMS_score and its 95 % interval (BCa bootstrap "
        "over the variants, resampling seed 0), and with --elbo-samples the paired difference "
        "of the two scores' Spearman. Progress goes to stderr (--quiet: none).",
    )
    parser.add_argument("--dms", type=Path, required=True, help="ProteinGym indel CSV")
    parser.add_argument(
        "--wt", required=True, help="wild-type sequence or FASTA file (one record, or --wt-id)"
    )
    parser.add_argument(
        "--wt-id", default=None, help="the record of a multi-record --wt FASTA to use (its id)"
    )
    _add_ckpt_arguments(parser)
    add_output_options(parser, kind="file", help="CSV to write (new file)")
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="also write a score-vs-DMS_score scatter (PNG, one panel per score) to this file",
    )
    parser.add_argument(
        "--elbo-samples", type=nonnegative_int, default=0, help="also score by MC ELBO"
    )
    parser.add_argument("--skip-non-deletions", action="store_true", help="skip insertions")
    _add_skip_nonstandard(parser)
    _add_quiet(parser, "the model passes and variants")
    ns = parser.parse_args(list(argv))
    out = check_output_options(ns, kind="file")  # before any work
    plot = (
        check_out_file(ns.plot, option="--plot", overwrite=ns.overwrite)
        if ns.plot is not None
        else None
    )
    skipped_out = out.with_name(f"{out.stem}.skipped.csv")
    if ns.skip_non_deletions or ns.skip_nonstandard:  # where skipped rows would be listed
        check_out_file(skipped_out, option="--out", overwrite=ns.overwrite)

    from bio_scisor.elbo import score_elbo
    from bio_scisor.io import read_dms_indels
    from bio_scisor.metrics import (
        spearman,
        spearman_difference_interval,
        spearman_interval,
    )
    from bio_scisor.proteingym import csv_text, table_columns, variant_table
    from bio_scisor.scoring import score_path
    from iclr26_common.effects import interval_text
    from iclr26_common.outputs import write_bytes, write_text

    wt = _read_wt(ns.wt, ns.wt_id)
    assay = read_dms_indels(
        ns.dms,
        wt,
        on_non_deletion="skip" if ns.skip_non_deletions else "error",
        on_nonstandard="skip" if ns.skip_nonstandard else "error",
    )
    names = ["scisor_path", *(["scisor_elbo"] if ns.elbo_samples else [])]
    table_columns(assay, names, ns.dms)  # an input column the scores would overwrite: refused
    model, process = _load_denoiser(ns.ckpt, ns.esm_config, ns.p0)
    if ns.elbo_samples and process["official"] and process["background"] is None:
        raise UsageError(
            f"--ckpt {ns.ckpt} is an upstream checkpoint: --elbo-samples needs --p0 (upstream's "
            "p0.pt, the residue distribution it was trained with; not shipped here because the "
            "upstream repository has no licence)"
        )
    columns = {"scisor_path": score_path(model, wt, assay.mutants, quiet=ns.quiet)}
    if ns.elbo_samples:  # the forward process the checkpoint was trained with
        columns["scisor_elbo"] = score_elbo(
            model,
            wt,
            assay.mutants,
            ns.elbo_samples,
            power=process["alpha_power"],
            t_max=process["t_max"],
            background=process["background"],
            quiet=ns.quiet,
        )
    header, rows = variant_table(
        assay, {c: [f"{v:.6f}" for v in values] for c, values in columns.items()}, ns.dms
    )
    write_text(out, csv_text(header, rows))
    if plot is not None:
        from bio_scisor.plots import scatter_png

        write_bytes(plot, scatter_png(assay.scores, columns, assay.n_deleted, Path(ns.dms).name))
    for name, values in columns.items():
        interval = spearman_interval(values, assay.scores)
        print(
            f"{name}: Spearman {spearman(values, assay.scores):+.3f} on {len(values)} variants, 95 % "
            + interval_text(interval, len(values), "variants", "+.3f", missing=NO_SPEARMAN_INTERVAL)
        )
    if "scisor_elbo" in columns:
        diff = spearman_difference_interval(
            columns["scisor_elbo"], columns["scisor_path"], assay.scores
        )
        gap = spearman(columns["scisor_elbo"], assay.scores) - spearman(
            columns["scisor_path"], assay.scores
        )
        print(
            f"scisor_elbo - scisor_path: Spearman {gap:+.3f}, 95 % "
            + interval_text(
                diff, len(assay.scores), "variants, paired", "+.3f", missing=NO_SPEARMAN_INTERVAL
            )
        )
    if assay.skipped:
        print(f"skipped {assay.skipped} rows that are not deletions of the wild type")
    if assay.skipped_nonstandard:
        print(
            f"skipped {assay.skipped_nonstandard} rows whose sequence holds a non-standard "
            "character (X, *, ...)"
        )
    if assay.skipped_rows:
        _write_skipped(skipped_out, assay)
        print(f"wrote {skipped_out} ({len(assay.skipped_rows)} skipped rows: line, reason)")
    elif skipped_out.is_file() and ns.overwrite:  # an earlier run's list: not this run's
        skipped_out.unlink()
    print(f"wrote {ns.out}" + (f" and {plot}" if plot is not None else ""))
    return 0


def _add_skip_nonstandard(parser: ArgumentParser) -> None:
    parser.add_argument(
        "--skip-nonstandard",
        action="store_true",
        help="skip variants whose sequence holds a character other than the 20 standard "
        "residues (ProteinGym's X, a trailing *), counted and reported; without it such a row "
        "is an error naming the file, line and character",
    )


def _write_skipped(path: Path, assay: Any) -> None:
    """The rows ``score`` left out: their line in the input, the reason, every input column."""
    from bio_scisor.proteingym import csv_text
    from iclr26_common.outputs import write_text

    columns = list(assay.columns)
    rows = [
        [line, reason, *(row.get(c) or "" for c in columns)]
        for line, reason, row in assay.skipped_rows
    ]
    write_text(path, csv_text(["line", "reason", *columns], rows))


def proteingym_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="bio-scisor proteingym",
        description="Score every assay listed in a ProteinGym DMS_indels.csv reference file "
        "(assay CSVs in --dms-dir) and print ProteinGym's indel summary: Spearman per assay, "
        "averaged per (UniProt_ID, coarse_selection_type), per type, then across types, with "
        "ProteinGym's bootstrap SE, for all, single and multi deletions, each with a 95 % "
        "interval over the proteins (t under 10, BCa bootstrap from 10; resampling seed 0). "
        "Writes per-assay score CSVs (every column of the assay file, ids first, then n_deleted, "
        "scisor_path) with a score-vs-DMS scatter DMS_ID.png each, summary.csv (per assay: "
        "Spearman with a 95 % interval over its variants, columns "
        "spearman_low/_high/_ci_method/_n/_resample_seed, skipped_nonstandard), "
        "summary_splits.csv (the printed all/single/multi Spearman, SE and interval) and "
        "summary.json (per split) into --out. With --benchmark clinical: ProteinGym's clinical indel "
        "set (clinical_indels.csv, per-protein files with mutated_sequence and DMS_bin_score "
        "Pathogenic/Benign), scored the same way; per-protein AUC of benign vs pathogenic and "
        "their average, with 95 % intervals the same way (auc_low, ...).",
    )
    parser.add_argument(
        "--reference", type=Path, required=True, help="DMS_indels.csv or clinical_indels.csv"
    )
    parser.add_argument("--dms-dir", type=Path, required=True, help="folder of assay CSVs")
    parser.add_argument(
        "--benchmark", choices=("dms", "clinical"), default="dms", help="which ProteinGym set"
    )
    _add_ckpt_arguments(parser)
    add_output_options(parser, resumable=True)
    parser.add_argument("--skip-non-deletions", action="store_true", help="skip insertions")
    _add_skip_nonstandard(parser)
    parser.add_argument(
        "--n-resamples",
        type=positive_int,
        default=9999,
        help="bootstrap resamples of each assay's Spearman (or protein's AUC) interval",
    )
    _add_quiet(parser, "the assays")
    ns = parser.parse_args(list(argv))
    out = check_output_options(ns)  # before any work
    if ns.n_resamples < 100:
        parser.error("--n-resamples must be >= 100")

    from bio_scisor.proteingym import score_clinical_reference, score_reference
    from iclr26_common.effects import interval_text

    model, _ = _load_denoiser(ns.ckpt, ns.esm_config, ns.p0)
    options = dict(
        on_non_deletion="skip" if ns.skip_non_deletions else "error",
        n_resamples=ns.n_resamples,
        quiet=ns.quiet,
        on_nonstandard="skip" if ns.skip_nonstandard else "error",
    )
    if ns.benchmark == "clinical":
        clinical = score_clinical_reference(model, ns.reference, ns.dms_dir, out, **options)
        _print_nonstandard(out.path, "proteins")
        print(
            f"clinical AUC {clinical['auc']:.3f}{_se_text(clinical['se'])} "
            f"({clinical['n_proteins']} proteins with both labels, "
            f"{clinical['n_variants']} deletions), 95 % "
            + interval_text(clinical["interval"], clinical["interval_n"], "proteins", "+.3f")
        )
        print(f"wrote {ns.out}")
        return 0
    summary = score_reference(model, ns.reference, ns.dms_dir, out, **options)
    _print_nonstandard(out.path, "assays")
    for split, values in summary.items():
        print(
            f"{split:6s} Spearman {values['spearman']:+.3f}{_se_text(values['se'])} "
            f"({values['n_assays']} assays, {values['n_proteins']} proteins), 95 % "
            + interval_text(values["interval"], values["interval_n"], "proteins", "+.3f")
        )
    print(f"wrote {ns.out}")
    return 0


def _print_nonstandard(folder: Path, units: str) -> None:
    """With --skip-nonstandard: how many rows were skipped, from summary.csv's
    ``skipped_nonstandard`` column (where the count is written, per assay)."""
    import csv

    with (folder / "summary.csv").open(newline="") as handle:
        counts = [int(r["skipped_nonstandard"]) for r in csv.DictReader(handle)]
    if sum(counts):
        print(
            f"skipped {sum(counts)} rows whose sequence holds a non-standard character (X, *, "
            f"...) in {sum(c > 0 for c in counts)} {units} (summary.csv: skipped_nonstandard)"
        )


def _se_text(se: float) -> str:
    """`` ± SE`` (ProteinGym's bootstrap SE); nothing where it is 0 or undefined (one protein
    per selection type: resampling within types changes nothing), never a ``± 0.000``."""
    return f" ± {se:.3f}" if se > 1e-9 else ""  # 0 up to the bootstrap's rounding


def shrink_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="bio-scisor shrink",
        description="Remove ceil(L * pct / 100) residues from every sequence of a FASTA file, one "
        "reverse step at a time, and write the shrunk sequences as FASTA with upstream's header "
        "'HEADER|deletions A3,G10|percentage PCT' (deleted residues with 0-based positions).",
    )
    parser.add_argument("--fasta", type=Path, required=True, help="input FASTA/A2M/Stockholm")
    parser.add_argument(
        "--pct", type=positive_float, required=True, help="percentage to remove (0, 100)"
    )
    _add_ckpt_arguments(parser)
    add_output_options(parser, kind="file", help="FASTA to write (new file)")
    parser.add_argument(
        "--temperature", type=nonnegative_float, default=1.0, help="0 = top-1 deletions"
    )
    parser.add_argument("--seed", type=int, default=0)
    _add_quiet(parser, "the sequences")
    ns = parser.parse_args(list(argv))
    out = check_output_options(ns, kind="file")  # before any work
    if not 0 < ns.pct < 100:
        parser.error("--pct must be in (0, 100)")

    import torch

    from bio_scisor.io import read_sequences, write_fasta
    from bio_scisor.scoring import shrink_positions
    from iclr26_common.progress import progress

    records = read_sequences(ns.fasta, header=True)
    model, _ = _load_denoiser(ns.ckpt, ns.esm_config, ns.p0)
    gen = torch.Generator().manual_seed(ns.seed)
    shrunk = []
    # upstream's header: HEADER|deletions A3,G10|percentage 10
    for header, seq in progress(records, description="sequences", quiet=ns.quiet):
        short, deleted = shrink_positions(model, seq, ns.pct, ns.temperature, gen)
        listed = ",".join(f"{seq[i]}{i}" for i in deleted)
        shrunk.append((f"{header}|deletions {listed}|percentage {ns.pct:g}", short))
    write_fasta(out, shrunk)
    print(f"wrote {out} ({len(shrunk)} sequences)")
    return 0


def synth_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="bio-scisor synth",
        description="Sample a family from a profile HMM with conserved motifs and write "
        "family.fasta, family.a2m, wt.fasta, a ProteinGym-format deletion CSV, DMS_indels.csv "
        "and motifs.json into --out.",
    )
    add_output_options(parser, help="folder to write (new or empty)")
    parser.add_argument("--n", type=positive_int, default=400, help="family members")
    parser.add_argument("--n-match", type=positive_int, default=80, help="match states")
    parser.add_argument("--n-motifs", type=int, default=3, choices=(2, 3))
    parser.add_argument(
        "--n-multi", type=nonnegative_int, default=120, help="2-3-residue deletion variants"
    )
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(list(argv))
    out = check_output_options(ns)  # before any work

    from bio_scisor.synth import make_assay, make_family, write_family

    family = make_family(ns.n, ns.n_match, ns.n_motifs, seed=ns.seed)
    make_assay(family, ns.n_multi, seed=ns.seed)
    with out:
        write_family(family, out.path)
    print(f"wrote {ns.out} ({ns.n} sequences, {len(family.variants)} deletion variants)")
    return 0


SCRIPT = ConsoleScript(
    "bio_scisor",
    __version__,
    DESCRIPTION,
    COMMANDS,
    handlers=lambda: {
        "score": score_main,
        "proteingym": proteingym_main,
        "shrink": shrink_main,
        "synth": synth_main,
    },
    run_lightning=run_lightning_cli,
    lightning=TRAINER_SUBCOMMANDS,
    error_types=("bio_scisor.io:ScisorFormatError",),
    configs_width=12,
)


def main(args: Sequence[str] | None = None) -> int:
    """Entry point; input errors end with ``bio-scisor: error: ...`` and exit code 2
    (``BIO_SCISOR_TRACEBACK=1`` shows the traceback instead)."""
    return SCRIPT.main(args)


if __name__ == "__main__":
    sys.exit(main())
