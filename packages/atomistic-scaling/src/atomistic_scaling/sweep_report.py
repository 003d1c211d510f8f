"""Reports of a sweep: plots (loss vs compute and vs D, seed means, with the trivial predictor),
the markdown table of fitted exponents, and the JSON-ready fits."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.outputs import write_bytes

__all__ = ["plot_sweep", "public_fits", "summary_table"]


def _mean_curve(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(x, seed-mean loss) over D for the rows of one architecture and width."""
    ds = sorted({r["D"] for r in rows})
    xs = [float(np.mean([r[key] for r in rows if r["D"] == d])) for d in ds]
    return xs, [float(np.mean([r["loss"] for r in rows if r["D"] == d])) for d in ds]


def _save_png(fig: Any, path: Path) -> Path:
    """``fig`` as a PNG at ``path``, written atomically with mode 0644."""
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=110, format="png")
    return write_bytes(path, buffer.getvalue())


def _tick_text(x: float, _pos: Any = None) -> str:
    return f"{x:.0f}" if 1 <= x < 1e5 else f"{x:.2g}"


def _readable_log_x(ax: Any, values: list[float]) -> None:
    """Few, non-overlapping x tick labels on a log axis (issue 39: matplotlib's defaults put a
    label at minor ticks too when the data spans under a few decades, drawn over each other):
    the values themselves when there are at most 4 distinct ones, else at most 4 labelled
    decades when the data spans >= 1 decade, else 3 ticks spread over the data; minor ticks
    unlabelled; labels turned by 30 degrees."""
    from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter

    distinct = sorted(set(values))
    lo, hi = distinct[0], distinct[-1]
    if len(distinct) > 4 and hi >= 10 * lo:
        ax.xaxis.set_major_locator(LogLocator(base=10, numticks=4))
    else:
        ticks = distinct if len(distinct) <= 4 else list(np.geomspace(lo, hi, 3))
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(_tick_text)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", which="major", labelrotation=30, labelsize=7)


def plot_sweep(
    records: list[dict[str, Any]],
    fits: dict[str, Any],
    out_dir: Path,
    trivial: float | None = None,
) -> list[str]:
    """Seed-mean loss vs compute per architecture (one curve per width, the frontier fit) and
    loss vs D at the largest width; the trivial predictor's loss as a dotted line. PNGs written
    with the object API. Returns the file names."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir.mkdir(parents=True, exist_ok=True)
    archs = list(fits)
    fig = Figure(figsize=(4 * len(archs), 3.4))
    FigureCanvasAgg(fig)
    for k, arch in enumerate(archs):
        ax = fig.add_subplot(1, len(archs), k + 1)
        rows = [r for r in records if r["arch"] == arch]
        for width in sorted({r["width"] for r in rows}):
            pts = [r for r in rows if r["width"] == width]
            ax.loglog(
                *_mean_curve(pts, "compute"),
                "o-",
                ms=3,
                label=f"w={width} (N={pts[0]['n_params']})",
            )
        cf = fits[arch].get("_gamma_c_fit")
        if cf is not None:
            comp = np.array([r["compute"] for r in rows])
            grid = np.logspace(np.log10(comp.min()), np.log10(comp.max()), 50)
            ax.loglog(
                grid,
                cf.predict(np.log(grid)[:, None]),
                "k--",
                label=f"frontier γ_c={fits[arch]['gamma_c']:.2f}",
            )
        if trivial is not None:
            ax.axhline(trivial, color="grey", ls=":", label="trivial predictor")
        ax.set_title(f"{arch}: α={fits[arch]['alpha']:.2f} β={fits[arch]['beta']:.2f}")
        _readable_log_x(ax, [float(r["compute"]) for r in rows])
        ax.set_xlabel("compute C (FLOPs)")
        if k == 0:
            ax.set_ylabel("validation loss (seed mean)")
        ax.legend(fontsize=6)
    fig.tight_layout()
    _save_png(fig, out_dir / "loss_vs_compute.png")

    fig = Figure(figsize=(5, 3.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for arch in archs:
        rows = [r for r in records if r["arch"] == arch]
        widest = max(r["width"] for r in rows)
        pts = [r for r in rows if r["width"] == widest]
        ax.loglog(
            *_mean_curve(pts, "D"),
            "o-",
            ms=3,
            label=f"{arch} (w={widest}) β={fits[arch]['beta']:.2f}",
        )
    if trivial is not None:
        ax.axhline(trivial, color="grey", ls=":", label="trivial predictor")
    _readable_log_x(ax, [float(r["D"]) for r in records])
    ax.set_xlabel("training structures D (one run each)")
    ax.set_ylabel("validation loss (seed mean)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save_png(fig, out_dir / "loss_vs_data.png")
    return ["loss_vs_compute.png", "loss_vs_data.png"]


def summary_table(fits: dict[str, Any], trivial: float | None = None) -> str:
    """Markdown table of the fitted exponents with 95 % bootstrap CIs (over seeds), the final
    loss at the largest N and D, the cells the ``L(N, D)`` fit used (of all), and the fit's
    problems; the trivial predictor's loss below."""

    def cell(entry: dict[str, Any], key: str) -> str:
        value = entry.get(key, float("nan"))
        lo, hi = entry["ci"].get(key, (float("nan"), float("nan")))
        return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"

    def cells(entry: dict[str, Any]) -> str:
        if "fitted_cells" not in entry:
            return "all"
        return f"{entry['fitted_cells']}/{entry['fitted_cells'] + len(entry['dropped_cells'])}"

    lines = [
        "| arch | α (N) | β (D) | a = β/(α+β) | γ = αβ/(α+β) | γ_c (compute frontier) | "
        "γ_t (time frontier) | κ measured | final loss | cells fitted | fit problems |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arch, e in fits.items():
        lines.append(
            f"| {arch} | {cell(e, 'alpha')} | {cell(e, 'beta')} | {cell(e, 'a')} | "
            f"{cell(e, 'gamma')} | {cell(e, 'gamma_c')} | {cell(e, 'gamma_t')} | "
            f"{e['kappa']:.1f} | {e['final_loss']:.3f} | {cells(e)} | "
            f"{'; '.join(e['problems']) or 'none'} |"
        )
    if trivial is not None:
        lines.append(f"\nTrivial predictor (per-element references, zero forces): {trivial:.3f}")
    return "\n".join(lines)


def public_fits(fits: dict[str, Any]) -> dict[str, Any]:
    """``fits`` without the fit objects (JSON-ready)."""
    return {
        arch: {k: v for k, v in entry.items() if not k.startswith("_")}
        for arch, entry in fits.items()
    }
