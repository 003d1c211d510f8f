"""``llm-methods meta_router fit|route|simulate|official``: Meta-Router causal LLM routing."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

ABOUT = "Meta-Router: causal LLM routing from gold + preference labels (arXiv 2509.25535)"
PROG = "llm-methods meta_router"


def _parser():  # type: ignore[no-untyped-def]
    from iclr26_common.cli_support import finite_float
    from llm_methods.meta_router.model import LEARNERS
    from llm_methods.method_cli import ArgumentParser, out_args, seed, show_defaults

    parser = ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fit = sub.add_parser(
        "fit",
        help="fit the DR-corrected router (and baselines with --test)",
        description="Gold labels (T=1) from RouteLLM-style response CSVs "
        "(prompt + one score column per model), preference labels (T=0) from "
        "CSVs of the same shape or MT-Bench judgements; writes router.joblib "
        "and fit.json into --out.",
    )
    fit.add_argument(
        "--gold", type=Path, nargs="+", required=True, help="gold-label response CSVs (T=1)"
    )
    fit.add_argument(
        "--preference", type=Path, nargs="*", default=[], help="preference-label CSVs (T=0)"
    )
    fit.add_argument(
        "--mtbench",
        type=Path,
        nargs=2,
        metavar=("JUDGEMENTS", "QUESTIONS"),
        help="MT-Bench judgements.jsonl and question.jsonl as preference labels",
    )
    fit.add_argument(
        "--strong",
        required=True,
        help="premium model's score column in the --gold / --preference CSVs (and its MT-Bench "
        "name unless --mtbench-strong)",
    )
    fit.add_argument(
        "--weak",
        required=True,
        help="cheap model's score column in the CSVs (and its MT-Bench name unless --mtbench-weak)",
    )
    fit.add_argument(
        "--mtbench-strong",
        default=None,
        metavar="NAME",
        help="the premium model's 'model' field in the MT-Bench judgements, where it differs "
        "from the CSV column (default: --strong)",
    )
    fit.add_argument(
        "--mtbench-weak",
        default=None,
        metavar="NAME",
        help="the cheap model's 'model' field in the MT-Bench judgements (default: --weak)",
    )
    fit.add_argument(
        "--learner",
        choices=LEARNERS,
        default="dr_official",
        help="CATE learner of the bias: dr_official (the default: the paper's estimator, the "
        "official in-sample DR-learner with mask and clipping; the experiment's claims use it), "
        "r_official (the official R-learner); econml's cross-fitted dr (the default before "
        "issue 42: it loses to gold-only at the official split), r, lineardr, tlearner. "
        "dr_official stops where gold and preference queries do not overlap (its mask keeps "
        "no row): --learner dr fits there",
    )
    fit.add_argument(
        "--test",
        type=Path,
        default=None,
        help="CSV with features and true gain 'm' (from simulate): report each method's MSE "
        "with a 95 %% interval over the test queries and dr_corrected's paired MSE difference "
        "to each baseline (resampling seed --seed)",
    )
    out_args(fit, "output folder", required=True)
    fit.add_argument("--seed", type=seed, default=0, help="random seed (cross-fitting, CIs)")
    route = sub.add_parser("route", help="route queries: premium iff m̂(x) − w·ΔC > 0")
    route.add_argument("--router", type=Path, required=True, help="router.joblib from fit")
    route.add_argument(
        "--queries", type=Path, required=True, help="CSV with prompt or x0.. columns"
    )
    route.add_argument("--w", type=finite_float, default=0.2, help="cost weight w")
    route.add_argument(
        "--cost-diff", type=finite_float, default=1.0, help="ΔC, premium − cheap cost"
    )
    out_args(route, "output file: the routes CSV", required=True, kind="file")
    off = sub.add_parser(
        "official",
        help="the official experiment on the official CSV",
        description="Reads the official Meta-Router CSV (embd.PC1.., GL, PL), "
        "runs the official splits (500 test, 100 gold, rest preference) and "
        "writes the official efficiency gain per method and run settings.",
    )
    off.add_argument("--csv", type=Path, required=True, help="1_PC50_varstd.csv")
    off.add_argument("--runs", type=int, default=10, help="Monte-Carlo runs (official: 200)")
    off.add_argument(
        "--learner",
        choices=LEARNERS,
        nargs="+",
        default=["dr", "r"],
        help="CATE learners to compare",
    )
    off.add_argument("--seed", type=seed, default=42, help="run i uses seed + i (official: 42)")
    out_args(off, "output folder (efficiency_gain.csv, summary.json)", required=True)
    sim = sub.add_parser("simulate", help="simulated gold/preference/test CSVs with known bias")
    out_args(sim, "output folder (gold.csv, preference.csv, test.csv)", required=True)
    sim.add_argument("--n", type=int, default=4000, help="simulated queries")
    sim.add_argument(
        "--gold-frac", type=finite_float, default=0.1, help="share of gold-labelled queries"
    )
    sim.add_argument("--bias", type=finite_float, default=0.5, help="preference-label bias size")
    sim.add_argument("--seed", type=seed, default=0, help="random seed")
    return show_defaults(parser)


def _fit(ns) -> int:  # type: ignore[no-untyped-def]
    import io

    import joblib
    import numpy as np
    import pandas as pd

    from iclr26_common.outputs import check_out_folder, write_bytes, write_text
    from llm_methods.meta_router.data import (
        RouterDataError,
        features,
        read_csv_frame,
        read_mtbench,
        read_responses_csv,
    )
    from llm_methods.meta_router.model import METHODS, MetaRouter, fit_method, predict_gain

    out = check_out_folder(ns.out, overwrite=ns.overwrite)  # before any fitting
    # the test file too: an empty or malformed CSV is one line before the fit, not a traceback after
    test = None if ns.test is None else read_csv_frame(Path(ns.test))
    if test is not None and "m" not in test.columns:
        raise RouterDataError(f"{ns.test}: missing column 'm' (the true gain)")
    frames = [read_responses_csv(p, ns.strong, ns.weak, 1) for p in ns.gold]
    frames += [read_responses_csv(p, ns.strong, ns.weak, 0) for p in ns.preference]
    names = {"strong": ns.mtbench_strong or ns.strong, "weak": ns.mtbench_weak or ns.weak}
    if ns.mtbench:
        try:
            frames.append(read_mtbench(*ns.mtbench, names["strong"], names["weak"]))
        except RouterDataError as error:
            if "no judgements for model" not in str(error):
                raise
            raise RouterDataError(
                f"{error}; name the models as the judgements do with --mtbench-strong / "
                "--mtbench-weak"
            ) from None
    elif ns.mtbench_strong or ns.mtbench_weak:
        raise ValueError("--mtbench-strong / --mtbench-weak name models of --mtbench files")
    kinds = {"prompt" in f.columns for f in frames}
    if len(kinds) > 1:
        raise ValueError("mix of prompt and x0.. feature files: use one kind of query features")
    data = pd.concat(frames, ignore_index=True)
    x, state = features(data)
    y, t = data["y"].to_numpy(float), data["T"].to_numpy(int)
    from llm_methods.meta_router.official import overlap_diagnostics, overlap_line

    overlap = overlap_diagnostics(x, t, ns.seed)
    print(overlap_line(overlap))
    if overlap["cv_auc"] >= NO_OVERLAP_AUC:
        overlap["warning"] = (
            f"no overlap: the label source (gold or preference) is predicted from the query "
            f"features at CV AUC {overlap['cv_auc']:.3f}, so the gold and preference queries "
            "barely share a region and the bias correction extrapolates there; use gold and "
            "preference labels of the same kind of queries"
        )
        print(f"{PROG} fit: warning: {overlap['warning']}", file=sys.stderr)
    router = MetaRouter(ns.learner, ns.seed).fit(x, y, t)
    saved = io.BytesIO()
    joblib.dump({"router": router, "features": state}, saved)
    report = {
        **router.info,
        "learner": ns.learner,
        "strong": ns.strong,
        "weak": ns.weak,
        **({"mtbench_names": names} if ns.mtbench else {}),
        "overlap": overlap,
    }
    if test is not None:
        xt, _ = features(test.drop(columns=["m", "q_weak"], errors="ignore"), state, ns.test)
        m = test["m"].to_numpy(float)
        # dr_corrected is the router just fitted (fit_method would fit the same one again)
        models = {
            method: router if method == "dr_corrected" else fit_method(method, x, y, t, ns.seed)
            for method in METHODS
        }
        errors = {method: (predict_gain(model, xt) - m) ** 2 for method, model in models.items()}
        report["test_mse"] = {method: float(np.mean(e)) for method, e in errors.items()}
        intervals = mse_intervals(errors, ns.seed)
        report.update(
            {key: {k: v for k, (v, _) in part.items()} for key, part in intervals.items()}
        )
    with out:
        write_bytes(out.path / "router.joblib", saved.getvalue())
        write_text(out.path / "fit.json", json.dumps(report, indent=1))
    print(" ".join(f"{k}={v}" for k, v in report.items() if k not in INTERVAL_KEYS))
    if ns.test is not None:
        n = len(m)
        print(f"test MSE, 95 % intervals over the {n} test queries (resampling seed {ns.seed}):")
        for method, (_, text) in intervals["test_mse_interval"].items():
            print(f"  {method:16s} {report['test_mse'][method]:.4g} {text}")
        for key, (value, text) in intervals["test_mse_diff"].items():
            print(f"  {key:34s} {value['estimate']:+.4g} {text}")
    print(f"wrote {ns.out / 'router.joblib'} and {ns.out / 'fit.json'}")
    return 0


#: ``fit`` warns (and fit.json's ``overlap.warning`` says) when the gold / preference label
#: source is predicted from the query features at this cross-validated AUC or above: no overlap.
NO_OVERLAP_AUC = 0.99

#: fit.json's interval keys (not in the one-line summary, printed below it instead).
INTERVAL_KEYS = ("test_mse_interval", "test_mse_diff")
REFERENCE = "dr_corrected"


def mse_intervals(errors: dict, seed: int = 0) -> dict[str, dict[str, tuple[dict, str]]]:
    """95 % intervals of ``fit --test``'s MSEs from ``errors`` ({method: squared error per test
    query}, the same queries for every method), :mod:`iclr26_common.effects`:

    - ``test_mse_interval``: {method: each MSE over the queries (``mean_interval``: BCa bootstrap
      from 10 queries, t below)};
    - ``test_mse_diff``: {"dr_corrected - BASELINE": MSE(dr_corrected) - MSE(baseline) with a
      paired interval over the same queries (``paired_interval``); identical errors give an
      exact 0}.

    Each value is (``Interval.to_dict()``, or ``method: "none"`` for a single query; the printed
    text). Resampling seed ``seed``."""
    import dataclasses

    import numpy as np

    from iclr26_common.effects import (
        interval_dict,
        interval_or_none,
        interval_text,
        mean_interval,
        paired_interval,
    )

    units = "test queries"
    out: dict[str, dict[str, tuple[dict, str]]] = {"test_mse_interval": {}, "test_mse_diff": {}}
    for method, e in errors.items():
        n = len(e)
        interval = interval_or_none(
            lambda e=e: mean_interval(e, seed=seed, units=units, binary=False)
        )
        out["test_mse_interval"][method] = (
            interval_dict(interval, n, units, float(np.mean(e))),
            interval_text(interval, n, units, ".4g"),
        )
    if REFERENCE in errors:
        for method, e in errors.items():
            if method == REFERENCE:
                continue
            diff = interval_or_none(lambda e=e: paired_interval(errors[REFERENCE], e, seed=seed))
            if diff is not None:  # paired_interval names its units "items"
                diff = dataclasses.replace(diff, units=units)
            estimate = float(np.mean(errors[REFERENCE]) - np.mean(e))
            out["test_mse_diff"][f"{REFERENCE} - {method}"] = (
                interval_dict(diff, len(e), units, estimate),
                interval_text(diff, len(e), units, ".4g"),
            )
    return out


def _route(ns) -> int:  # type: ignore[no-untyped-def]
    import io

    import joblib
    import pandas as pd

    from iclr26_common.outputs import check_out_file, write_text
    from iclr26_common.textio import input_file
    from llm_methods.jsonl import read_text
    from llm_methods.meta_router.data import RouterDataError, features

    check_out_file(ns.out, overwrite=ns.overwrite)
    input_file(ns.router, "router file")  # missing or a folder: one line naming it
    # missing, a folder or not UTF-8: one line naming the file (not pandas' UnicodeDecodeError)
    queries_text = read_text(ns.queries, RouterDataError, "queries file")
    try:
        saved = joblib.load(ns.router)  # a pickle: only load routers you trust
    except Exception as error:  # truncated, not a pickle, or a foreign object
        raise RouterDataError(
            f"{ns.router}: not a router saved by `meta_router fit` ({type(error).__name__})"
        ) from None
    if not (isinstance(saved, dict) and {"router", "features"} <= set(saved)):
        raise RouterDataError(f"{ns.router}: not a router saved by `meta_router fit`")
    try:
        queries = pd.read_csv(io.StringIO(queries_text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise RouterDataError(f"{ns.queries}: not a readable CSV ({error})") from None
    x, _ = features(queries, saved["features"], ns.queries)  # bad cells: file, row, column
    gain = saved["router"].gain(x)
    out = queries.copy()
    out["gain_hat"] = gain
    out["premium"] = (gain - ns.w * ns.cost_diff > 0).astype(int)
    write_text(ns.out, out.to_csv(index=False))
    print(f"{int(out['premium'].sum())}/{len(out)} queries to the premium model; wrote {ns.out}")
    return 0


def _official(ns) -> int:  # type: ignore[no-untyped-def]
    import numpy as np
    import pandas as pd

    from iclr26_common.outputs import check_out_folder, write_text
    from llm_methods.meta_router.model import fit_method, predict_gain
    from llm_methods.meta_router.official import (
        GRID,
        PLOT_SCALE,
        efficiency_curve,
        efficiency_gain,
        overlap_diagnostics,
        overlap_line,
        read_official_csv,
        split_run,
    )

    if ns.runs < 1:
        raise ValueError("--runs must be >= 1")
    out = check_out_folder(ns.out, overwrite=ns.overwrite)  # before the runs
    x, gl, pl = read_official_csv(ns.csv)
    methods = [("gold_only", "dr"), ("preference_only", "dr"), ("pooled", "dr")]
    methods += [("dr_corrected", learner) for learner in ns.learner]
    curves: dict[str, list] = {"random": []}
    overlap = None
    for run in range(ns.runs):
        seed = ns.seed + run
        test, gold, pref = split_run(len(gl), seed)
        train = np.concatenate([gold, pref])
        y = np.concatenate([gl[gold], pl[pref]])
        t = np.concatenate([np.ones(len(gold), int), np.zeros(len(pref), int)])
        if overlap is None:
            overlap = overlap_diagnostics(x[train], t, seed)
            print(overlap_line(overlap))
        for method, learner in methods:
            name = method if method != "dr_corrected" else f"dr_corrected_{learner}"
            model = fit_method(method, x[train], y, t, seed, learner)
            curves.setdefault(name, []).append(
                efficiency_curve(predict_gain(model, x[test]), gl[test])
            )
        rng = np.random.default_rng(seed)
        curves["random"].append(efficiency_curve(None, gl[test], rng))
        print(f"run {run + 1}/{ns.runs} done")
    gains = {m: efficiency_gain(c, curves["random"]) for m, c in curves.items() if m != "random"}
    table = pd.DataFrame({"ratio": GRID, **gains})
    summary = {
        "runs": ns.runs,
        "seed": ns.seed,
        "overlap_run0": overlap,
        "plot_scale": PLOT_SCALE,
        "methods": {},
    }
    for name, gain in gains.items():
        ok = ~np.isnan(gain)
        summary["methods"][name] = {
            "area": float(np.trapezoid(gain[ok], GRID[ok])) if ok.sum() > 1 else None,
            "max_gain": float(np.nanmax(gain)) if ok.any() else None,
            "max_gain_plot_scale": float(np.nanmax(gain) / PLOT_SCALE) if ok.any() else None,
            "valid_points": int(ok.sum()),
        }
        print(
            f"{name:28s} efficiency-gain area {summary['methods'][name]['area']}, max "
            f"{summary['methods'][name]['max_gain']} ({int(ok.sum())} grid points)"
        )
    with out:
        write_text(out.path / "efficiency_gain.csv", table.to_csv(index=False))
        write_text(out.path / "summary.json", json.dumps(summary, indent=1))
    print(f"wrote {ns.out / 'efficiency_gain.csv'} and {ns.out / 'summary.json'}")
    return 0


def _simulate(ns) -> int:  # type: ignore[no-untyped-def]
    from iclr26_common.outputs import check_out_folder, write_text
    from llm_methods.meta_router.data import simulate

    out = check_out_folder(ns.out, overwrite=ns.overwrite)
    train, test = simulate(ns.n, ns.gold_frac, ns.bias, ns.seed)
    cols = [c for c in train.columns if c.startswith("x")]
    weak = 0.5 + 0.2 * train["x4"]
    with out:
        for name, arm in (("gold", 1), ("preference", 0)):
            part = train[train["T"] == arm]
            frame = part[cols].assign(strong=(weak[part.index] + part["y"]), weak=weak[part.index])
            write_text(out.path / f"{name}.csv", frame.to_csv(index=False))
        write_text(out.path / "test.csv", test.to_csv(index=False))
    print(
        f"wrote gold.csv ({int(train['T'].sum())} rows), preference.csv "
        f"({int((train['T'] == 0).sum())} rows), test.csv ({len(test)} rows) to {ns.out}"
    )
    return 0


def main(argv: Sequence[str]) -> int:
    ns = _parser().parse_args(list(argv))
    return {"fit": _fit, "route": _route, "simulate": _simulate, "official": _official}[ns.command](
        ns
    )
