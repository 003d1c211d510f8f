"""``llm-methods mas2 generate|run|train|synth``: MAS² self-generating multi-agent systems.

``generate`` writes (or validates) a workflow + assignment for a task; ``run`` executes the
tri-agent team (or a given workflow) on tasks with the simulated pool, an OpenAI-compatible
server or a core model and writes per-task results; ``train`` runs Collaborative Tree
Optimization on the simulated pool and writes ``team.json`` (progress over each round's trees
on stderr unless ``--quiet``; its state after each round kept in ``--out``, marked partial, so
an interrupted run continues with ``--resume``); ``synth`` writes offline tasks.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from iclr26_common.device import add_device_option
from iclr26_common.progress import add_quiet_option

ABOUT = "MAS² self-generating, self-rectifying multi-agent systems (arXiv 2509.24323)"
PROG = "llm-methods mas2"
TASK_SOURCES = ("synth-arith", "synth-code", "synth-mixed", "humaneval")


def _parser() -> argparse.ArgumentParser:
    from iclr26_common.cli_support import finite_float
    from llm_methods.method_cli import ArgumentParser, out_args, seed, show_defaults

    parser = ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def tasks_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--tasks",
            default="synth-mixed",
            help=f"a task .jsonl(.gz) file or one of {', '.join(TASK_SOURCES)}",
        )
        p.add_argument("--limit", type=int, default=None, help="first N tasks only")
        p.add_argument("--seed", type=seed, default=0, help="random seed")
        p.add_argument(
            "--allow-unisolated",
            action="store_true",
            help="run generated code even where no OS-level sandbox (bubblewrap, "
            "user namespaces) exists: rlimits and an audit hook only, not a security "
            "boundary",
        )

    def backend_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--backend",
            choices=("sim", "openai", "local"),
            default="sim",
            help="sim: the simulated pool; openai: an OpenAI-compatible server; "
            "local: a core model spec (--model)",
        )
        p.add_argument(
            "--pool",
            type=Path,
            default=None,
            help="simulated pool YAML (default: shipped sim_pool.yaml)",
        )
        p.add_argument(
            "--base-url", default="http://127.0.0.1:8000/v1", help="openai: server base URL"
        )
        p.add_argument(
            "--models",
            default=None,
            help="backbone pool for openai/local: NAME=PRICE,... ($ per 1M tokens)",
        )
        p.add_argument(
            "--model",
            default="smollm2",
            help="core model spec for --backend local (--local-model before 0.8.0)",
        )
        add_device_option(p, also="where --backend local's model runs; checked with every backend")
        p.add_argument("--retries", type=int, default=3, help="openai: retries per request")
        p.add_argument("--team", type=Path, default=None, help="team.json from 'train'")

    gen = sub.add_parser(
        "generate",
        help="write (or --validate) a workflow + assignment",
        description="Write the workflow + assignment of the first task (of the first --limit "
        "tasks with --limit N).",
    )
    tasks_args(gen)
    backend_args(gen)
    gen.add_argument(
        "--validate",
        type=Path,
        default=None,
        help="only validate this workflow spec file (text DSL or JSON)",
    )
    gen.add_argument(
        "--llm-generator",
        action="store_true",
        help="the generator is the backend's first model writing the DSL",
    )
    out_args(
        gen,
        "output file: the workflow JSON (a JSON list of them with --limit > 1)",
        kind="file",
    )
    run = sub.add_parser("run", help="run the tri-agent team on tasks; per-task results")
    tasks_args(run)
    backend_args(run)
    run.add_argument(
        "--workflow", type=Path, default=None, help="a fixed workflow spec instead of the generator"
    )
    run.add_argument("--no-rectifier", action="store_true", help="generate-once")
    run.add_argument("--reps", type=int, default=1, help="runs per task")
    out_args(run, "output folder (results.jsonl, summary.json)", required=True)
    add_quiet_option(run)
    train = sub.add_parser("train", help="CTO (K=4 x N=2 + rectifier branches) on the sim pool")
    tasks_args(train)
    train.add_argument(
        "--pool",
        type=Path,
        default=None,
        help="simulated pool YAML (default: shipped sim_pool.yaml)",
    )
    train.add_argument("--rounds", type=int, default=3, help="CTO rounds (trees, then DPO)")
    train.add_argument("--k", type=int, default=4, help="generator samples per task")
    train.add_argument("--n", type=int, default=2, help="implementer samples per workflow")
    train.add_argument(
        "--r", type=int, default=2, help="rectifier branches at the first rectification"
    )
    train.add_argument("--beta", type=finite_float, default=1.0, help="DPO temperature")
    train.add_argument("--no-rectifier", action="store_true", help="train generate-once")
    out_args(train, "output folder (team.json, history.json)", required=True, resumable=True)
    add_quiet_option(train)
    synth = sub.add_parser("synth", help="write offline tasks (arithmetic jsonl / HumanEval jsonl)")
    synth.add_argument("--kind", choices=("arith", "code"), default="arith", help="task kind")
    synth.add_argument("--n", type=int, default=20, help="tasks")
    synth.add_argument("--seed", type=seed, default=0, help="random seed")
    out_args(synth, "output .jsonl file", required=True, kind="file")
    return show_defaults(parser)


def _tasks(ns: argparse.Namespace) -> list:
    from llm_methods.mas2.tasks import generate_arith, generate_code, load_humaneval, read_tasks

    n = ns.limit or 10
    if ns.tasks == "synth-arith":
        return generate_arith(n, ns.seed)
    if ns.tasks == "synth-code":
        return generate_code(n, ns.seed)
    if ns.tasks == "synth-mixed":
        return generate_arith((n + 1) // 2, ns.seed) + generate_code(n // 2, ns.seed)
    if ns.tasks == "humaneval":
        return load_humaneval(ns.limit)
    return read_tasks(Path(ns.tasks), ns.limit)


def _prices(spec: str | None) -> dict[str, float]:
    if not spec:
        raise ValueError("--models NAME=PRICE,... is required with --backend openai/local")
    prices = {}
    for item in spec.split(","):
        name, _, price = item.partition("=")
        try:
            prices[name.strip()] = float(price)
        except ValueError:
            raise ValueError(f"--models: {item!r} is not NAME=PRICE") from None
        if not name.strip() or prices[name.strip()] < 0:
            raise ValueError(f"--models: {item!r} is not NAME=PRICE with PRICE >= 0")
    return prices


def _setup(ns: argparse.Namespace):  # type: ignore[no-untyped-def]
    """(agent, grader, model names, theta, cheapest, team, backend or None)."""
    from llm_methods.mas2.policy import Team
    from llm_methods.mas2.pool import SimAgent, load_pool
    from llm_methods.mas2.tasks import Grader

    device = None
    if ns.device is not None:  # a bad --device: one line, before any work, whatever the backend
        from llm_methods.lm.loading import resolve_device

        device = str(resolve_device(ns.device))
    grader = Grader(allow_unisolated=ns.allow_unisolated)
    pool = load_pool(ns.pool)
    backend = None
    if ns.backend == "sim":
        agent, prices = SimAgent(pool, grader), {m.name: m.price for m in pool.models.values()}
    else:
        from llm_methods.mas2.backends import LLMAgent, LocalLMBackend, OpenAIBackend

        prices = _prices(ns.models)
        backend = (
            OpenAIBackend(ns.base_url, retries=ns.retries)
            if ns.backend == "openai"
            else LocalLMBackend(ns.model, device)
        )
        agent = LLMAgent(backend, prices, grader)
    names = tuple(prices)
    team = Team.load(ns.team) if ns.team else Team.uniform(names)
    if set(team.models) != set(names):
        raise ValueError(f"{ns.team}: team models {list(team.models)} != pool {list(names)}")
    cheapest = min(prices, key=prices.__getitem__)
    return agent, grader, names, pool.theta, cheapest, team, backend, pool


def _generate(ns: argparse.Namespace) -> int:
    import random

    from iclr26_common.outputs import check_out_file, write_text
    from llm_methods.mas2.dsl import parse_workflow

    if ns.validate is not None:
        from llm_methods.jsonl import read_text

        wf = parse_workflow(read_text(ns.validate, ValueError, "workflow file"), ns.validate.stem)
        print(f"{ns.validate}: valid workflow, {len(wf.nodes)} nodes, output {wf.output!r}")
        return 0
    if ns.out:
        check_out_file(ns.out, overwrite=ns.overwrite)  # before the backend is reached
    if ns.llm_generator and ns.backend == "sim":
        raise ValueError("--llm-generator needs --backend openai or local")
    _, _, names, _, _, team, backend, _ = _setup(ns)
    rng = random.Random(ns.seed)
    tasks = _tasks(ns)[: ns.limit or 1]  # the first task, or the first --limit tasks
    written = []
    for task in tasks:
        if ns.llm_generator:
            from llm_methods.mas2.backends import llm_generate_workflow

            wf = llm_generate_workflow(backend, names[0], task)
        else:
            wf = team.generate(task, rng)
        assign = team.implement(task, wf, rng)
        print(f"# task {task.task_id} ({task.kind})\n{wf.to_text()}")
        print("# assignment: " + ", ".join(f"{k}={v}" for k, v in assign.items()))
        written.append({**wf.to_dict(), "assignment": assign, "task_id": task.task_id})
    if ns.out:
        payload = written[0] if ns.limit is None or ns.limit == 1 else written
        write_text(ns.out, json.dumps(payload, indent=1))
        print(f"wrote {len(written)} workflow(s) to {ns.out}")
    return 0


def _run(ns: argparse.Namespace) -> int:
    import random

    from iclr26_common.outputs import check_out_folder, write_text
    from iclr26_common.progress import progress
    from llm_methods.mas2.dsl import parse_workflow
    from llm_methods.mas2.execute import execute

    if ns.reps < 1:
        raise ValueError("--reps must be >= 1")
    out = check_out_folder(ns.out, overwrite=ns.overwrite)  # before any task runs
    agent, grader, names, theta, cheapest, team, _, _ = _setup(ns)
    fixed = None
    if ns.workflow is not None:
        from llm_methods.jsonl import read_text

        fixed = parse_workflow(
            read_text(ns.workflow, ValueError, "workflow file"), ns.workflow.stem
        )
    tasks = _tasks(ns)
    rng = random.Random(ns.seed)
    rows = []
    runs = [task for task in tasks for _ in range(ns.reps)]
    for task in progress(runs, description="mas2 run tasks", quiet=ns.quiet):
        wf = fixed or team.generate(task, rng)
        assign = team.implement(task, wf, rng)
        tr = execute(
            wf,
            assign,
            task,
            agent,
            grader,
            random.Random(rng.randrange(2**31)),
            names,
            None if ns.no_rectifier else team.rectify,
            theta,
            cheapest,
        )
        rows.append(
            {
                "task_id": task.task_id,
                "kind": task.kind,
                "workflow": wf.to_text(),
                "assignment": tr.assignment,
                "success": tr.success,
                "cost": tr.cost,
                "tokens": tr.tokens,
                "answer": tr.answer,
                "events": [{k: v for k, v in e.items() if k != "actions"} for e in tr.events],
            }
        )
    n = len(rows)
    summary = {
        "n": n,
        "backend": ns.backend,
        "success": sum(r["success"] for r in rows) / n,
        "cost_per_task": sum(r["cost"] for r in rows) / n,
        "tokens_per_task": sum(r["tokens"] for r in rows) / n,
        "rectifications_per_task": sum(len(r["events"]) for r in rows) / n,
        **isolation_summary(grader),
    }
    with out:
        write_text(out.path / "results.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        write_text(out.path / "summary.json", json.dumps(summary, indent=1))
    print(f"generated code ran in: {summary['isolation_boundary']}")
    print(
        f"success {summary['success']:.3f}, ${summary['cost_per_task']:.6f} and "
        f"{summary['tokens_per_task']:.0f} tokens per task over {n} runs -> {ns.out}"
    )
    return 0


#: what each sandbox mode is, in words (``summary.json``'s ``isolation_boundary``)
BOUNDARIES = {
    "bwrap": "bubblewrap (OS-level: new namespaces, no network, no other files)",
    "userns": "user namespaces (OS-level: new namespaces, no network, no other files)",
    "none": "rlimits and the audit hook only (no OS-level boundary; --allow-unisolated)",
}


def isolation_summary(grader: object) -> dict[str, object]:
    """``{"isolation": [modes], "isolation_boundary": words}`` of the sandbox boundaries the
    generated code of this command ran in (``Grader.isolation``): ``bwrap``, ``userns`` or
    ``none`` (hook only); no mode when no program ran."""
    modes = sorted(getattr(grader, "isolation", set()))
    words = "; ".join(BOUNDARIES.get(m, m) for m in modes) or "no generated code was run"
    return {"isolation": modes, "isolation_boundary": words}


#: ``mas2 train``'s state in ``--out`` after each finished CTO round (settings, history, team,
#: random stream), written atomically; ``--resume`` continues from it; removed once
#: ``team.json`` and ``history.json`` are written.
TRAIN_STATE = "cto-state.json"


def _train_settings(ns: argparse.Namespace) -> dict[str, object]:
    """What ``mas2 train``'s result depends on (``--resume`` refuses other values)."""
    tasks = ns.tasks if ns.tasks in TASK_SOURCES else str(Path(ns.tasks).resolve())
    return {
        "tasks": tasks,
        "limit": ns.limit,
        "seed": ns.seed,
        "pool": None if ns.pool is None else str(Path(ns.pool).resolve()),
        **{key: getattr(ns, key) for key in ("rounds", "k", "n", "r", "beta", "no_rectifier")},
    }


def _resumed_state(folder: Path, settings: dict[str, object]) -> dict | None:
    """The state an interrupted ``mas2 train`` with the same ``settings`` left in ``folder``
    (``None`` when it finished no round); a missing or unreadable state or other settings are
    one line naming them."""
    from iclr26_common.cli_support import UsageError
    from iclr26_common.outputs import compare_settings

    path = folder / TRAIN_STATE
    if not path.is_file():
        raise UsageError(f"--out {folder}: no {TRAIN_STATE} to resume; pass --overwrite")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        earlier = dict(state["settings"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UsageError(f"{path}: not readable ({type(e).__name__}); pass --overwrite") from None
    options = {k: f"--{k.replace('_', '-')}" for k in settings}
    compare_settings(earlier, settings, "mas2 train", path, options=options)
    return state if state.get("history") else None


def _train(ns: argparse.Namespace) -> int:
    from iclr26_common.outputs import check_output_options, write_text
    from iclr26_common.progress import progress
    from llm_methods.lm.threads import one_thread
    from llm_methods.mas2.cto import CTOConfig, train_cto
    from llm_methods.mas2.policy import Team
    from llm_methods.mas2.pool import SimAgent, load_pool
    from llm_methods.mas2.tasks import Grader

    cfg = CTOConfig(
        k=ns.k, n=ns.n, r=ns.r, rounds=ns.rounds, beta=ns.beta, use_rectifier=not ns.no_rectifier
    )
    # before CTO: a folder of earlier results needs --overwrite, an interrupted one --resume
    out = check_output_options(ns)
    settings = _train_settings(ns)
    state = _resumed_state(out.path, settings) if out.resumed else None
    pool = load_pool(ns.pool)
    grader = Grader(allow_unisolated=ns.allow_unisolated)
    agent = SimAgent(pool, grader)
    tasks = _tasks(ns)
    grader.prefetch([job for t in tasks for job in agent.programs(t)])
    team = Team.from_dict(state["team"]) if state else Team.uniform(pool.names)
    start = None
    if state:
        version, internal, gauss = state["rng_state"]
        start = (state["history"], (version, tuple(internal), gauss))
        print(f"resuming after round {len(state['history']) - 1} of {out.path / TRAIN_STATE}")

    def save_state(history: list[dict[str, float]], rng_state: object) -> None:
        payload = {"settings": settings, "history": history, "rng_state": rng_state}
        write_text(out.path / TRAIN_STATE, json.dumps({**payload, "team": team.to_dict()}))

    def trees(rnd: int, round_tasks: Sequence) -> object:
        description = f"CTO round {rnd + 1}/{cfg.rounds}"
        return progress(round_tasks, description=description, quiet=ns.quiet)

    with out:  # marked partial until team.json and history.json are written
        if not out.resumed:
            save_state([], None)
        with one_thread():
            history = train_cto(
                team,
                tasks,
                agent,
                grader,
                pool,
                cfg,
                ns.seed,
                log=print,
                start=start,
                after_round=save_state,
                trees=trees,
            )
        team.save(out.path / "team.json")
        write_text(out.path / "history.json", json.dumps(history, indent=1))
        (out.path / TRAIN_STATE).unlink()  # the results are written: nothing to resume
    print(f"generated code ran in: {isolation_summary(grader)['isolation_boundary']}")
    print(f"wrote {out.path / 'team.json'}")
    return 0


def main(argv: Sequence[str]) -> int:
    ns = _parser().parse_args(list(argv))
    if getattr(ns, "limit", None) is not None and ns.limit < 1:
        raise ValueError("--limit must be >= 1")
    if ns.command == "synth":
        from iclr26_common.outputs import check_out_file
        from llm_methods.mas2.tasks import generate_arith, generate_code, write_tasks

        if ns.n < 1:
            raise ValueError("--n must be >= 1")
        check_out_file(ns.out, overwrite=ns.overwrite)
        tasks = (generate_arith if ns.kind == "arith" else generate_code)(ns.n, ns.seed)
        print(f"wrote {ns.n} {ns.kind} tasks to {write_tasks(tasks, ns.out)}")
        return 0
    from llm_methods.mas2.sandbox import SandboxError, SandboxUnavailable

    try:
        return {"generate": _generate, "run": _run, "train": _train}[ns.command](ns)
    except (SandboxError, SandboxUnavailable) as e:
        raise ValueError(str(e)) from None
