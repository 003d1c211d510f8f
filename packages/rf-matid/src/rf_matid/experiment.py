"""Miniature RF-MatID benchmark for ``iclr26 reproduce`` (entry point ``rf-matid.benchmark``).

Four claims, each judged on its own by a rule fixed here before any run (module constants), on
the primary model's seed-mean test accuracies:

  (a) S1 (random split over repeated measurements) accuracy >= ``S1_MIN_ACCURACY`` (80 %);
  (b) S2-mod2 (train 750-2000 mm, test 200-700 mm) at least ``DISTANCE_DROP_MIN`` (10 points)
      below S1;
  (c) S2-mod3 (train 200-1450 mm, test 1500-2000 mm) at least ``DISTANCE_DROP_MIN`` below S1;
  (d) S3-mod1 (test angles 2, 5, 8 deg) at most ``ANGLE_GAP_MAX`` (5 points) below S1 (or above).

Preconditions (issue 22, fixed before the run that follows them): the split claims (b)-(d)
compare a shifted split with S1, which says something only when the model has learned the
in-distribution task, so each needs S1 >= ``S1_MIN_LEARNED`` (50 %, 8x chance for 16 classes);
below it they are "inconclusive" (the 3-epoch run "held" (c) with every seed predicting one
class, 6.25 %). Claim (b) ("nearer distances are harder") also needs the synthetic data to have a
mechanism that makes near range harder: the generator's material-echo to interference ratio
(:func:`rf_matid.synth.echo_to_interference_db`) must be lower at S2-mod2's test distances than
at its train distances. In this generator it is higher (the echo falls as 1/R against a fixed
horn leakage; there is no near-field or multipath term), so (b) is inconclusive by construction
and the report says why: the paper's near-range measurements that would give such a term are
not available here.

The experiment's verdict follows from the claims (held only if all hold). Until the 2026-12
review the two distance shifts were judged on their mean, which hid that S2-mod2 did not drop;
the thresholds are unchanged. The scale (grid, repeats, epochs, seeds) was chosen by timing
against the budget (full run <= 10 min, quick run <= 60 s on 2 CPU cores, from process start),
not by outcome; see ``settings``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iclr26_common import Claim, Experiment, Precondition, Result

if TYPE_CHECKING:
    from rf_matid.benchmark import BenchmarkRow

PAPER = (
    "RF-MatID: Dataset and Benchmark for Radio Frequency Material Identification (arXiv 2601.20377)"
)
CLAIM = (
    "Learning-based models identify 16 fine-grained materials from wide-band (4-43.5 GHz) S11 with "
    "high in-distribution accuracy (random split S1); accuracy drops under cross-distance "
    "extrapolation (S2-mod2: train 750-2000 mm / test 200-700 mm; S2-mod3: train 200-1450 mm / test "
    "1500-2000 mm), while cross-angle interpolation (S3-mod1: test angles 2, 5, 8 deg) stays close to "
    "in-distribution accuracy."
)
SPLITS = ("S1", "S2-mod2", "S2-mod3", "S3-mod1")
PRIMARY_MODEL = "material_id"
PROTOCOL = "P1"
# Pre-registered thresholds (seed-mean test accuracy, as fractions).
S1_MIN_ACCURACY = 0.80
DISTANCE_DROP_MIN = 0.10  # for S2-mod2 and for S2-mod3, each on its own
ANGLE_GAP_MAX = 0.05
# Precondition of the split claims (b)-(d): the model learned the in-distribution task.
S1_MIN_LEARNED = 0.50
NUM_CLASSES = 16  # the synthetic set's fine-grained classes (chance = 1/16 = 6.25 %)
# S2-mod2's test distances (upstream split_config: 200-700 mm); the rest are its train distances.
NEAR_TEST_MAX_MM = 700
# Thresholds are inclusive; accuracies are count ratios, so allow for float rounding only.
_ROUNDING = 1e-9
# Upstream draws S1 (and our S2/S3 validation hold-out) with seed 42 whatever the training seed.
SPLIT_SEED = 42

CLAIM_TEXTS = {
    "s1_high": "High in-distribution accuracy on the random split S1.",
    "s2_mod2_drop": "Accuracy drops when extrapolating to nearer distances "
    "(S2-mod2: train 750-2000 mm, test 200-700 mm).",
    "s2_mod3_drop": "Accuracy drops when extrapolating to farther distances "
    "(S2-mod3: train 200-1450 mm, test 1500-2000 mm).",
    "s3_mod1_near_s1": "Cross-angle interpolation (S3-mod1: test angles 2, 5, 8 deg) stays "
    "close to in-distribution accuracy.",
}
CRITERIA = {
    "s1_high": f"S1 test accuracy (seed mean) >= {100 * S1_MIN_ACCURACY:.0f} %",
    "s2_mod2_drop": f"S1 - S2-mod2 >= {100 * DISTANCE_DROP_MIN:.0f} points (seed means)",
    "s2_mod3_drop": f"S1 - S2-mod3 >= {100 * DISTANCE_DROP_MIN:.0f} points (seed means)",
    "s3_mod1_near_s1": f"S1 - S3-mod1 <= {100 * ANGLE_GAP_MAX:.0f} points (seed means; "
    "S3-mod1 may be above S1)",
}


def settings(quick: bool) -> dict[str, Any]:
    """The miniature scale, chosen by timing (see the README's Results section).

    Full run, issue 22: 2 seeds x 8 epochs (was 3 seeds x 3 epochs). Three epochs (~160
    optimizer steps) left S1 at 30 % where a 10-epoch run had reached 82 %, so the split claims
    could not be judged; the budget (about 74 training-epochs of this grid on 2 cores, timed from
    the 3-epoch run: 5 min 05 s for 36) pays for 8 epochs (~430 steps) only with 2 seeds. Chosen
    from that timing before running, not from any result.
    """
    if quick:
        return {
            "distances_mm": list(range(200, 2001, 300)),
            "angles_deg": [0, 5, 10],  # S3-mod1: test 5 deg, train 0 and 10 deg
            "samples_per_position": 2,
            "models": [PRIMARY_MODEL],
            "seeds": [0],
            "epochs": 1,
        }
    return {
        "distances_mm": list(range(200, 2001, 300)),
        "angles_deg": list(range(0, 11)),
        "samples_per_position": 2,
        "models": [PRIMARY_MODEL],
        "seeds": [0, 1],
        "epochs": 8,
    }


def verdict_checks(accuracy: dict[str, float]) -> dict[str, bool]:
    """The four pre-registered criteria on seed-mean test accuracies per split (what each
    criterion alone says; the preconditions are applied in :func:`claims`)."""
    s1 = accuracy["S1"]
    return {
        "s1_high": s1 >= S1_MIN_ACCURACY - _ROUNDING,
        "s2_mod2_drop": s1 - accuracy["S2-mod2"] >= DISTANCE_DROP_MIN - _ROUNDING,
        "s2_mod3_drop": s1 - accuracy["S2-mod3"] >= DISTANCE_DROP_MIN - _ROUNDING,
        "s3_mod1_near_s1": s1 - accuracy["S3-mod1"] <= ANGLE_GAP_MAX + _ROUNDING,
    }


def s1_learned(accuracy: dict[str, float]) -> Precondition:
    """Control of the split claims: S1 seed-mean accuracy >= ``S1_MIN_LEARNED``."""
    s1 = accuracy["S1"]
    return Precondition(
        "model learned the in-distribution task",
        f"S1 test accuracy (seed mean) >= {100 * S1_MIN_LEARNED:.0f} % "
        f"({S1_MIN_LEARNED * NUM_CLASSES:.0f}x chance, 1/{NUM_CLASSES})",
        {"S1_pct": round(100 * s1, 2), "chance_pct": round(100 / NUM_CLASSES, 2)},
        s1 >= S1_MIN_LEARNED - _ROUNDING,
    )


def near_range_control(distances_mm: list[int]) -> Precondition:
    """Control of claim (b): the generator makes S2-mod2's test distances (<= 700 mm) harder
    than its train distances, i.e. their mean echo-to-interference ratio (dB) is lower."""
    from rf_matid.synth import echo_to_interference_db

    ratios = echo_to_interference_db(distances_mm)
    near = [r for d, r in zip(distances_mm, ratios, strict=True) if d <= NEAR_TEST_MAX_MM]
    far = [r for d, r in zip(distances_mm, ratios, strict=True) if d > NEAR_TEST_MAX_MM]
    near_db, far_db = statistics.fmean(near), statistics.fmean(far)
    return Precondition(
        "the synthetic data make near range harder",
        "mean material-echo to interference ratio (generator, no noise draws) at the S2-mod2 "
        f"test distances (<= {NEAR_TEST_MAX_MM} mm) below that at its train distances; the "
        "paper's near-range effects (near field, multipath) are not modelled",
        {"near_db": round(near_db, 2), "far_db": round(far_db, 2)},
        near_db < far_db,
    )


def claims(accuracy: dict[str, float], near_range: Precondition | None = None) -> list[Claim]:
    """One :class:`Claim` per check, with the numbers it was judged on (accuracy in %).

    Claims (b)-(d) need :func:`s1_learned`; claim (b) also ``near_range``
    (:func:`near_range_control` on the experiment's distances when None).
    """
    if near_range is None:
        near_range = near_range_control(settings(False)["distances_mm"])
    checks = verdict_checks(accuracy)
    pct = {split: round(100 * value, 2) for split, value in accuracy.items()}
    measured = {
        "s1_high": {"S1_pct": pct["S1"]},
        "s2_mod2_drop": {
            "S1_pct": pct["S1"],
            "S2-mod2_pct": pct["S2-mod2"],
            "drop_points": round(pct["S1"] - pct["S2-mod2"], 2),
        },
        "s2_mod3_drop": {
            "S1_pct": pct["S1"],
            "S2-mod3_pct": pct["S2-mod3"],
            "drop_points": round(pct["S1"] - pct["S2-mod3"], 2),
        },
        "s3_mod1_near_s1": {
            "S1_pct": pct["S1"],
            "S3-mod1_pct": pct["S3-mod1"],
            "gap_points": round(pct["S1"] - pct["S3-mod1"], 2),
        },
    }
    learned = s1_learned(accuracy)
    preconditions: dict[str, list[Precondition]] = {
        "s1_high": [],
        "s2_mod2_drop": [learned, near_range],
        "s2_mod3_drop": [learned],
        "s3_mod1_near_s1": [learned],
    }
    return [
        Claim.judge(
            text=CLAIM_TEXTS[name],
            criterion=CRITERIA[name],
            measured=measured[name],
            holds=held,
            preconditions=preconditions[name],
        )
        for name, held in checks.items()
    ]


def plot_split_bars(
    per_seed: dict[str, dict[str, list[float]]], path: Path, title: str = ""
) -> Path:
    """Seed-mean accuracy per split (bars, ± std), each seed as a dot, the S1 threshold."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / max(len(per_seed), 1)
    for k, (arch, by_split) in enumerate(per_seed.items()):
        xs = [i + k * width for i in range(len(SPLITS))]
        values = [[100 * v for v in by_split[s]] for s in SPLITS]
        ax.bar(
            xs,
            [statistics.fmean(v) for v in values],
            width,
            yerr=[statistics.stdev(v) if len(v) > 1 else 0.0 for v in values],
            label=f"{arch} (seed mean ± std)",
            capsize=3,
            alpha=0.8,
        )
        for x, v in zip(xs, values, strict=True):
            ax.plot([x] * len(v), v, "k.", ms=4)
    ax.axhline(100 * S1_MIN_ACCURACY, color="grey", lw=0.8, ls="--", label="S1 threshold")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(SPLITS))], SPLITS)
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title or "RF-MatID miniature: accuracy per split (synthetic data)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _workers(n_tasks: int) -> int:
    """Parallel trainings: one per torch thread this process was given, at most one per task."""
    import torch

    return max(1, min(n_tasks, torch.get_num_threads()))


@dataclass(frozen=True)
class Measurement:
    """What one run of the miniature benchmark measured: numbers only, no files and no prose
    (:func:`measure` makes it; :func:`write_plots` and :func:`report` read it).

    Attributes:
        quick: the scale of :func:`settings` it ran at.
        config: ``settings(quick)``.
        rows: a :class:`rf_matid.benchmark.BenchmarkRow` per model x split x seed (confusions).
        per_seed: test accuracy (a fraction) per model and split, one per seed in
            ``config["seeds"]`` order (:func:`per_seed_accuracy`).
        near_range: the near-range control of claim (b) on the run's distances.
        data_seconds, train_seconds: wall time of the synthetic data, of training and testing.
        workers: parallel training processes.
    """

    quick: bool
    config: dict[str, Any]
    rows: list[BenchmarkRow]
    per_seed: dict[str, dict[str, list[float]]]
    near_range: Precondition
    data_seconds: float
    train_seconds: float
    workers: int

    @property
    def means(self) -> dict[str, dict[str, float]]:
        """Seed-mean test accuracy ``[model][split]``."""
        return {a: {s: statistics.fmean(v) for s, v in d.items()} for a, d in self.per_seed.items()}

    @property
    def stds(self) -> dict[str, dict[str, float]]:
        """Sample standard deviation over seeds ``[model][split]`` (0 for one seed)."""
        return {
            a: {s: statistics.stdev(v) if len(v) > 1 else 0.0 for s, v in d.items()}
            for a, d in self.per_seed.items()
        }

    @property
    def primary(self) -> dict[str, float]:
        """The claims' numbers: :data:`PRIMARY_MODEL`'s seed-mean accuracy per split."""
        return self.means[PRIMARY_MODEL]


def per_seed_accuracy(
    rows: Sequence[BenchmarkRow], models: Sequence[str]
) -> dict[str, dict[str, list[float]]]:
    """Test accuracies ``[model][split] -> [one per row, in row order]`` for :data:`SPLITS`."""
    return {
        arch: {
            split: [r.accuracy for r in rows if r.arch == arch and r.split == split]
            for split in SPLITS
        }
        for arch in models
    }


def measure(quick: bool) -> Measurement:
    """Generate the synthetic data (in a temporary folder), train and test every model x split x
    seed of ``settings(quick)`` and return the numbers (module docstring)."""
    from rf_matid.benchmark import print_row, run_benchmark
    from rf_matid.synth_dataset import generate_dataset

    started = time.perf_counter()
    config = settings(quick)
    n_tasks = len(config["models"]) * len(SPLITS) * len(config["seeds"])
    workers = _workers(n_tasks)
    with tempfile.TemporaryDirectory(prefix="rf-matid-data-") as scratch:
        data_dir = generate_dataset(
            Path(scratch),
            distances_mm=config["distances_mm"],
            angles_deg=config["angles_deg"],
            samples_per_position=config["samples_per_position"],
            seed=0,
            write_time=False,
        )
        data_seconds = time.perf_counter() - started
        rows = run_benchmark(
            data_dir,
            config["models"],
            [PROTOCOL],
            SPLITS,
            config["seeds"],
            epochs=config["epochs"],
            on_row=print_row,
            workers=workers,  # one device each, from iclr26_common.device
            split_seed=SPLIT_SEED,
        )
    train_seconds = time.perf_counter() - started - data_seconds
    return Measurement(
        quick=quick,
        config=config,
        rows=list(rows),
        per_seed=per_seed_accuracy(rows, config["models"]),
        near_range=near_range_control(config["distances_mm"]),
        data_seconds=data_seconds,
        train_seconds=train_seconds,
        workers=workers,
    )


def write_plots(measurement: Measurement, out_dir: Path) -> list[str]:
    """The accuracy bars per split and the primary model's confusion matrices (first seed)
    into ``out_dir``; returns the file names."""
    from rf_matid.benchmark import plot_confusion

    config = measurement.config
    plots = [
        plot_split_bars(
            measurement.per_seed,
            out_dir / "accuracy_per_split.png",
            f"RF-MatID miniature ({'quick' if measurement.quick else 'full'}), synthetic data, "
            f"{config['epochs']} epoch(s), seeds {config['seeds']}",
        ).name
    ]
    for row in measurement.rows:
        if row.arch == PRIMARY_MODEL and row.seed == config["seeds"][0]:
            name = f"confusion_{row.arch}_{row.split}.png"
            plots.append(plot_confusion(row, out_dir / name).name)
    return plots


def results_table(measurement: Measurement) -> str:
    """Markdown: the primary model's sizes and accuracies per split, then every model."""
    from rf_matid.benchmark import markdown_table

    sizes = {r.split: (r.n_train, r.n_val, r.n_test) for r in measurement.rows}
    primary, stds = measurement.primary, measurement.stds[PRIMARY_MODEL]
    lines = [
        "| split | train / val / test spectra | test accuracy per seed (%) | mean ± std (%) |",
        "|---|---|---|---:|",
    ]
    for split in SPLITS:
        values = measurement.per_seed[PRIMARY_MODEL][split]
        lines.append(
            f"| {split} | {' / '.join(map(str, sizes[split]))} | "
            f"{' / '.join(f'{100 * v:.1f}' for v in values)} | "
            f"{100 * primary[split]:.1f} ± {100 * stds[split]:.1f} |"
        )
    return (
        "\n".join(lines)
        + "\n\nAll models (mean ± std over seeds):\n\n"
        + markdown_table(measurement.rows)
    )


def summary_text(measurement: Measurement, claim_list: Sequence[Claim]) -> str:
    """One paragraph: the primary model's accuracy per split, the drops and the verdicts."""
    primary, seeds = measurement.primary, measurement.config["seeds"]
    verdicts = ", ".join(
        f"({letter}) {claim.verdict}" for letter, claim in zip("abcd", claim_list, strict=True)
    )
    return (
        f"{PRIMARY_MODEL}, {PROTOCOL}, seed-mean test accuracy over seeds {seeds}: "
        f"S1 {100 * primary['S1']:.1f} %; S2-mod2 {100 * primary['S2-mod2']:.1f} % (drop "
        f"{100 * (primary['S1'] - primary['S2-mod2']):.1f} points); S2-mod3 "
        f"{100 * primary['S2-mod3']:.1f} % (drop {100 * (primary['S1'] - primary['S2-mod3']):.1f} "
        f"points); S3-mod1 {100 * primary['S3-mod1']:.1f} % (gap "
        f"{100 * (primary['S1'] - primary['S3-mod1']):.1f} points). Claims: {verdicts}."
    )


def details_text(measurement: Measurement) -> str:
    """The rules, the preconditions, the data and training scale, and the run's timing."""
    config = measurement.config
    return (
        "Each claim has its own rule, fixed in `rf_matid/experiment.py` before running: "
        + "; ".join(f"({k}) {CRITERIA[n]}" for k, n in zip("abcd", CRITERIA, strict=True))
        + ". The experiment holds only if all four do. Before the 2026-12 review the two "
        "distance shifts were judged on their mean, which hid that S2-mod2 did not drop; the "
        "thresholds are the old ones.\n\n"
        f"Preconditions: (b)-(d) need S1 >= {100 * S1_MIN_LEARNED:.0f} % (the model learned the "
        "in-distribution task), else they are inconclusive. (b) also needs the synthetic data to "
        "make near range harder; this generator's material-echo to interference ratio is higher "
        "at 200-700 mm than beyond (the echo falls as 1/R against a fixed horn leakage, with no "
        "near-field or multipath term, which would need the paper's near-range measurements), so "
        "(b) cannot be tested here and is inconclusive whatever the accuracies say.\n\n"
        "Data: physics-based synthetic S11 (ITU-R P.2040 dielectric slabs, horn leakage, path "
        "loss, round-trip phase, noise, per-sample jitter), written in the upstream folder/CSV "
        "format and read back through the real reader; not the real RF-MatID measurements. "
        f"{config['samples_per_position']} repeated measurements per position, so S1 is a random "
        f"split over repeated measurements as in the paper; the split seed is fixed at "
        f"{SPLIT_SEED} for every training seed. Training follows upstream's recipe for the model "
        "(AdamW, weight decay 1e-2, OneCycle peak 1e-3 stepped per batch, batch 32) but for "
        f"{config['epochs']} epoch(s) instead of 60; the last epoch's model is tested (no "
        "checkpoint chosen on test data). The scale was chosen by timing against the budget "
        "(full <= 10 min, quick <= 60 s on 2 CPU cores), not by outcome; at this scale the CNN "
        "is under-trained relative to upstream, so a claim that is not held here is not evidence "
        "against the paper."
        f"\n\nTime: data {measurement.data_seconds:.0f} s, training and testing "
        f"{measurement.train_seconds:.0f} s ({measurement.workers} parallel training "
        "process(es))."
    )


def report(measurement: Measurement, plots: Sequence[str] = ()) -> Result:
    """The :class:`Result` of ``measurement``: claims judged on its numbers, the summary, the
    table, the details and the metrics; ``plots`` are the file names :func:`write_plots` wrote."""
    config, primary = measurement.config, measurement.primary
    claim_list = claims(primary, measurement.near_range)
    checks = verdict_checks(primary)
    n_positions = len(config["distances_mm"]) * len(config["angles_deg"])
    n_spectra = NUM_CLASSES * n_positions * config["samples_per_position"]
    return Result(
        summary=summary_text(measurement, claim_list),
        metrics={
            "accuracy_mean": measurement.means,
            "accuracy_std": measurement.stds,
            "accuracy_per_seed": measurement.per_seed,
            "checks": checks,  # what each criterion alone says
            "verdicts": {
                name: claim.verdict for name, claim in zip(checks, claim_list, strict=True)
            },
            "timing_s": {
                "data": round(measurement.data_seconds, 1),
                "train_test": round(measurement.train_seconds, 1),
            },
            "workers": measurement.workers,
            "rows": [
                {k: v for k, v in row.__dict__.items() if k not in ("confusion", "class_names")}
                for row in measurement.rows
            ],
        },
        seeds=list(config["seeds"]),
        scale=(
            f"{NUM_CLASSES} classes × {len(config['distances_mm'])} distances × "
            f"{len(config['angles_deg'])} angles × {config['samples_per_position']} repeats = "
            f"{n_spectra} spectra (2048 bins, {PROTOCOL}); models {config['models']}; "
            f"{config['epochs']} epoch(s) of upstream's per-model recipe (AdamW, OneCycle, batch "
            "size)"
        ),
        claims=claim_list,
        table_markdown=results_table(measurement),
        plots=list(plots),
        details=details_text(measurement),
    )


def run(quick: bool, out_dir: Path) -> Result:
    """``iclr26 reproduce rf-matid.benchmark``: :func:`measure`, :func:`write_plots` into
    ``out_dir``, :func:`report`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    measurement = measure(quick)
    return report(measurement, write_plots(measurement, out_dir))


EXPERIMENT = Experiment(name="rf-matid.benchmark", paper=PAPER, claim=CLAIM, run=run, threads="all")
