"""``llm-methods bed``: BED-LLM question selection (EIG under a sample-then-filter belief).

``play`` runs 20 Questions games on a world (the exact synthetic world, the animals, or your own
world JSON) with a strategy and writes ``games.jsonl`` + ``summary.json``; the likelihood is the
world's own table (``--likelihood oracle``) or an LLM's yes/no next-token probabilities
(``--likelihood llm --model smollm2``). ``eig`` checks the EIG estimator against the exact EIG on
a world (Spearman vs N). ``world`` writes a world JSON (the offline generator).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from iclr26_common.device import add_device_option
from iclr26_common.progress import add_quiet_option

ABOUT = "BED-LLM expected-information-gain questioning, 20 Questions (arXiv 2508.21184)"
STRATEGY_CHOICES = ("bed", "entropy", "split", "random", "prompt_sim", "prompt", "cot")
#: ``play --model``'s default.
DEFAULT_MODEL = "smollm2"


def _parser() -> argparse.ArgumentParser:
    from llm_methods.method_cli import ArgumentParser, out_args, seed, show_defaults

    parser = ArgumentParser(prog="llm-methods bed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    play = sub.add_parser("play", help="play 20 Questions games with a strategy")
    play.add_argument("--world", default="exact", help="exact | animals | path to a world JSON")
    play.add_argument("--strategy", default="bed", choices=STRATEGY_CHOICES)
    play.add_argument(
        "--likelihood",
        default="oracle",
        choices=("oracle", "llm"),
        help="belief likelihood: the world's table or the LLM's (default oracle)",
    )
    play.add_argument(
        "--model", default=DEFAULT_MODEL, help="model spec for --likelihood llm / prompt / cot"
    )
    add_device_option(play)
    play.add_argument("--games", type=int, default=100, help="games played")
    play.add_argument("--n-hyp", type=int, default=32, help="N hypotheses kept")
    play.add_argument("--m-cand", type=int, default=5, help="M candidate questions per turn")
    play.add_argument("--max-turns", type=int, default=20, help="questions per game")
    play.add_argument("--seed", type=seed, default=0, help="seed of the targets and the games")
    out_args(play, "output folder", required=True)
    add_quiet_option(play)
    eig = sub.add_parser("eig", help="estimated vs exact EIG (Spearman) as N grows")
    eig.add_argument("--world", default="exact", help="exact | animals | path to a world JSON")
    eig.add_argument("--ns", default="2,8,32,128", help="comma-separated N values")
    eig.add_argument("--states", type=int, default=20, help="random game states")
    eig.add_argument("--seed", type=seed, default=0, help="seed of the game states")
    out_args(
        eig,
        "output .json file: the Spearman correlations printed, per N",
        required=True,
        kind="file",
    )
    world = sub.add_parser("world", help="write a world JSON (exact synthetic or animals)")
    world.add_argument("--kind", default="exact", choices=("exact", "animals"), help="generator")
    world.add_argument("--entities", type=int, default=64, help="exact: entities")
    world.add_argument(
        "--attributes", type=int, default=40, help="exact: attributes (more than --vague)"
    )
    world.add_argument("--vague", type=int, default=24, help="exact: vague attributes among them")
    world.add_argument("--seed", type=seed, default=0, help="seed of the generator")
    out_args(world, "output .json file", required=True, kind="file")
    return show_defaults(parser)


def _world(spec: str):  # type: ignore[no-untyped-def]
    from llm_methods.bed.experiment import EXACT_VAGUE
    from llm_methods.bed.worlds import animal_world, read_world, synthetic_world

    if spec == "exact":
        return synthetic_world(64, 40, n_vague=EXACT_VAGUE, seed=0)
    if spec == "animals":
        return animal_world()
    return read_world(spec)


def _positive(ns: argparse.Namespace, *names: str) -> None:
    for name in names:
        if getattr(ns, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(ns, name)}")


def _warn_unused_model_options(ns: argparse.Namespace, *, uses_lm: bool) -> None:
    """One stderr line when ``--model`` / ``--device`` were given to a game that loads no LLM
    (``--likelihood oracle`` with a strategy that asks none): they would do nothing, silently."""
    given = [
        option
        for option, given_it in (
            ("--model", ns.model != DEFAULT_MODEL),
            ("--device", ns.device is not None),
        )
        if given_it
    ]
    if given and not uses_lm:
        print(
            f"llm-methods bed play: warning: {' and '.join(given)} unused: --likelihood "
            f"{ns.likelihood} with --strategy {ns.strategy} loads no LLM (they are for "
            "--likelihood llm or --strategy prompt / cot)",
            file=sys.stderr,
        )


def _play(ns: argparse.Namespace) -> int:
    import numpy as np

    from iclr26_common.outputs import check_out_folder, write_text
    from llm_methods.bed.game import LLM_STRATEGIES, game_20q, play_lockstep

    _positive(ns, "games", "n_hyp", "m_cand", "max_turns")
    if ns.strategy in LLM_STRATEGIES and ns.m_cand > 9:
        raise ValueError("--m-cand must be <= 9 for the prompt / cot questioners")
    _warn_unused_model_options(ns, uses_lm=ns.likelihood == "llm" or ns.strategy in LLM_STRATEGIES)
    out = check_out_folder(ns.out, overwrite=ns.overwrite)  # before the model is loaded
    world = _world(ns.world)
    model_p = world.p_yes
    lm = None
    if ns.likelihood == "llm" or ns.strategy in LLM_STRATEGIES:
        from llm_methods.lm import load_lm

        lm = load_lm(ns.model, ns.device)
    if ns.likelihood == "llm":
        from iclr26_common.progress import progress
        from llm_methods.bed.llm import answer_probs

        chunks = [world.entities[i : i + 8] for i in range(0, len(world.entities), 8)]
        model_p = np.concatenate(
            [
                answer_probs(lm, chunk, world.questions)[..., 0]
                for chunk in progress(chunks, description="bed likelihood", quiet=ns.quiet)
            ]
        )
    rng = np.random.default_rng(ns.seed)
    targets = rng.integers(0, len(world.entities), ns.games)
    games = [
        game_20q(
            world,
            model_p,
            int(t),
            ns.strategy,
            rng,
            n_hyp=ns.n_hyp,
            m_cand=ns.m_cand,
            max_turns=ns.max_turns,
        )
        for t in targets
    ]
    if ns.strategy in LLM_STRATEGIES:
        from llm_methods.bed.llm import LLMQuestioner

        questioner = LLMQuestioner(lm, world.questions, mode=ns.strategy)
        results = play_lockstep(games, questioner, quiet=ns.quiet)
    else:  # non-LLM games never ask
        results = play_lockstep(games, lambda reqs: [], quiet=ns.quiet)
    rows = [
        {
            "target": world.entities[int(t)],
            "success": r.success,
            "turns": r.turns,
            "status": r.status,
            "questions": [world.questions[q] for q in r.questions],
            "message": r.message,
        }
        for t, r in zip(targets, results, strict=True)
    ]
    success = sum(r.success for r in results) / len(results)
    emptied = sum(r.status == "emptied" for r in results)
    summary = {
        "world": ns.world,
        "strategy": ns.strategy,
        "likelihood": ns.likelihood,
        "games": len(results),
        "success": success,
        "emptied": emptied,
        "n_hyp": ns.n_hyp,
        "m_cand": ns.m_cand,
        "max_turns": ns.max_turns,
    }
    with out:
        write_text(out.path / "games.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        write_text(out.path / "summary.json", json.dumps(summary, indent=1))
    print(
        f"{ns.strategy}: success {success:.3f} within {ns.max_turns} questions over "
        f"{len(results)} games ({emptied} emptied the hypothesis set) -> {ns.out}"
    )
    return 0


def _eig(ns: argparse.Namespace) -> int:
    from llm_methods.bed.analysis import eig_agreement

    try:
        values = [int(v) for v in ns.ns.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--ns must be comma-separated integers, got {ns.ns!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"--ns needs positive integers, got {ns.ns!r}")
    _positive(ns, "states")
    from iclr26_common.outputs import check_out_file, write_text

    check_out_file(ns.out, overwrite=ns.overwrite)  # before the world is read
    agree = eig_agreement(_world(ns.world), values, ns.states, seed=ns.seed)
    rows = [
        {
            "n": n,
            "spearman_posterior": agree["posterior"][n],
            "spearman_filtered": agree["filtered"][n],
        }
        for n in values
    ]
    record = {"world": ns.world, "states": ns.states, "seed": ns.seed, "rows": rows}
    write_text(ns.out, json.dumps(record, indent=1, default=float))
    print("| N | Spearman (θ ~ exact posterior) | Spearman (sample-then-filter) |")
    print("|---:|---:|---:|")
    for n in values:
        print(f"| {n} | {agree['posterior'][n]:.3f} | {agree['filtered'][n]:.3f} |")
    print(f"wrote {ns.out}")
    return 0


def main(argv: Sequence[str]) -> int:
    ns = _parser().parse_args(list(argv))
    if ns.command == "play":
        return _play(ns)
    if ns.command == "eig":
        return _eig(ns)
    from iclr26_common.outputs import check_out_file
    from llm_methods.bed.worlds import animal_world, synthetic_world, write_world

    check_out_file(ns.out, overwrite=ns.overwrite)
    if ns.kind == "animals":
        world = animal_world()
    else:
        _positive(ns, "entities", "attributes")
        if ns.vague < 0:
            raise ValueError(f"--vague must be >= 0, got {ns.vague}")
        if ns.attributes <= ns.vague:
            raise ValueError(
                f"--attributes must exceed --vague (the crisp attributes are the difference), "
                f"got --attributes {ns.attributes} --vague {ns.vague}"
            )
        world = synthetic_world(ns.entities, ns.attributes, n_vague=ns.vague, seed=ns.seed)
    path = write_world(world, ns.out)
    print(f"wrote {len(world.entities)} x {len(world.questions)} world to {path}")
    return 0
