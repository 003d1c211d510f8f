"""``llm-methods meta_router fit|route|simulate``: Meta-Router causal LLM routing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

ABOUT = "Meta-Router: causal LLM routing from gold + preference labels (arXiv 2509.25535)"
PROG = "llm-methods meta_router"


def _parser():  # type: ignore[no-untyped-def]
    from llm_methods.cliutils import ArgumentParser

    parser = ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fit = sub.add_parser("fit", help="fit the DR-corrected router (and baselines with --test)",
                         description="Gold labels (T=1) from RouteLLM-style response CSVs "
                         "(prompt + one score column per model), preference labels (T=0) from "
                         "CSVs of the same shape or MT-Bench judgements; writes router.joblib "
                         "and fit.json into --out.")  # fmt: skip
    fit.add_argument("--gold", type=Path, nargs="+", required=True)
    fit.add_argument("--preference", type=Path, nargs="*", default=[])
    fit.add_argument("--mtbench", type=Path, nargs=2, metavar=("JUDGEMENTS", "QUESTIONS"),
                     help="MT-Bench judgements.jsonl and question.jsonl as preference labels")  # fmt: skip
    fit.add_argument("--strong", required=True, help="premium model's column / name")
    fit.add_argument("--weak", required=True, help="cheap model's column / name")
    fit.add_argument("--learner", choices=("dr", "lineardr", "tlearner"), default="dr")
    fit.add_argument("--test", type=Path, default=None,
                     help="CSV with features and true gain 'm' (from simulate): report MSE")  # fmt: skip
    fit.add_argument("--out", type=Path, required=True)
    fit.add_argument("--seed", type=int, default=0)
    route = sub.add_parser("route", help="route queries: premium iff m̂(x) − w·ΔC > 0")
    route.add_argument("--router", type=Path, required=True, help="router.joblib from fit")
    route.add_argument(
        "--queries", type=Path, required=True, help="CSV with prompt or x0.. columns"
    )
    route.add_argument("--w", type=float, default=0.2, help="cost weight w")
    route.add_argument("--cost-diff", type=float, default=1.0, help="ΔC, premium − cheap cost")
    route.add_argument("--out", type=Path, required=True, help="routes CSV to write")
    sim = sub.add_parser("simulate", help="simulated gold/preference/test CSVs with known bias")
    sim.add_argument("--out", type=Path, required=True)
    sim.add_argument("--n", type=int, default=4000)
    sim.add_argument("--gold-frac", type=float, default=0.1)
    sim.add_argument("--bias", type=float, default=0.5)
    sim.add_argument("--seed", type=int, default=0)
    return parser


def _fit(ns) -> int:  # type: ignore[no-untyped-def]
    import joblib
    import numpy as np
    import pandas as pd

    from llm_methods.meta_router.data import features, read_mtbench, read_responses_csv
    from llm_methods.meta_router.model import METHODS, MetaRouter, fit_method, predict_gain

    frames = [read_responses_csv(p, ns.strong, ns.weak, 1) for p in ns.gold]
    frames += [read_responses_csv(p, ns.strong, ns.weak, 0) for p in ns.preference]
    if ns.mtbench:
        frames.append(read_mtbench(*ns.mtbench, ns.strong, ns.weak))
    kinds = {"prompt" in f.columns for f in frames}
    if len(kinds) > 1:
        raise ValueError("mix of prompt and x0.. feature files: use one kind of query features")
    data = pd.concat(frames, ignore_index=True)
    x, state = features(data)
    y, t = data["y"].to_numpy(float), data["T"].to_numpy(int)
    router = MetaRouter(ns.learner, ns.seed).fit(x, y, t)
    ns.out.mkdir(parents=True, exist_ok=True)
    joblib.dump({"router": router, "features": state}, ns.out / "router.joblib")
    report = {**router.info, "learner": ns.learner, "strong": ns.strong, "weak": ns.weak}
    if ns.test is not None:
        test = pd.read_csv(ns.test)
        if "m" not in test.columns:
            raise ValueError(f"{ns.test}: missing column 'm' (the true gain)")
        xt, _ = features(test.drop(columns=["m", "q_weak"], errors="ignore"), state)
        m = test["m"].to_numpy(float)
        report["test_mse"] = {
            method: float(np.mean((predict_gain(fit_method(method, x, y, t, ns.seed, ns.learner),
                                                xt) - m) ** 2))
            for method in METHODS
        }  # fmt: skip
    (ns.out / "fit.json").write_text(json.dumps(report, indent=1))
    print(" ".join(f"{k}={v}" for k, v in report.items()))
    print(f"wrote {ns.out / 'router.joblib'} and {ns.out / 'fit.json'}")
    return 0


def _route(ns) -> int:  # type: ignore[no-untyped-def]
    import joblib
    import pandas as pd

    from llm_methods.meta_router.data import features

    if not ns.router.is_file():
        raise FileNotFoundError(f"{ns.router}: no such router file")
    if not ns.queries.is_file():
        raise FileNotFoundError(f"{ns.queries}: no such file")
    saved = joblib.load(ns.router)  # a pickle: only load routers you trust
    queries = pd.read_csv(ns.queries)
    x, _ = features(queries, saved["features"])
    gain = saved["router"].gain(x)
    out = queries.copy()
    out["gain_hat"] = gain
    out["premium"] = (gain - ns.w * ns.cost_diff > 0).astype(int)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(ns.out, index=False)
    print(f"{int(out['premium'].sum())}/{len(out)} queries to the premium model; wrote {ns.out}")
    return 0


def _simulate(ns) -> int:  # type: ignore[no-untyped-def]
    from llm_methods.meta_router.data import simulate

    train, test = simulate(ns.n, ns.gold_frac, ns.bias, ns.seed)
    ns.out.mkdir(parents=True, exist_ok=True)
    cols = [c for c in train.columns if c.startswith("x")]
    weak = 0.5 + 0.2 * train["x4"]
    for name, arm in (("gold", 1), ("preference", 0)):
        part = train[train["T"] == arm]
        frame = part[cols].assign(strong=(weak[part.index] + part["y"]), weak=weak[part.index])
        frame.to_csv(ns.out / f"{name}.csv", index=False)
    test.to_csv(ns.out / "test.csv", index=False)
    print(f"wrote gold.csv ({int(train['T'].sum())} rows), preference.csv "
          f"({int((train['T'] == 0).sum())} rows), test.csv ({len(test)} rows) to {ns.out}")  # fmt: skip
    return 0


def main(argv: Sequence[str]) -> int:
    ns = _parser().parse_args(list(argv))
    return {"fit": _fit, "route": _route, "simulate": _simulate}[ns.command](ns)
