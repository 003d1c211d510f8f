"""MAS² tokens and cost per task vs the fixed hand-designed MAS, on the simulated pool.

Peer: the fixed MAS of the experiment (AnswerGenerate + Programmer + AnswerGenerate ->
ScEnsemble, all on the strongest model, no rectifier), measured in the same run on the same
held-out tasks. MAS² = the tri-agent team after CTO (3 rounds). Also sandbox runs per second.

    OMP_NUM_THREADS=1 uv run --no-sync python packages/llm-methods/benchmarks/bench_mas2.py
"""

from __future__ import annotations

import time


def main() -> None:
    import torch

    from llm_methods.mas2.cto import CTOConfig, train_cto
    from llm_methods.mas2.experiment import evaluate
    from llm_methods.mas2.policy import Team
    from llm_methods.mas2.pool import SimAgent, load_pool
    from llm_methods.mas2.sandbox import run_code
    from llm_methods.mas2.tasks import Grader, generate_arith, generate_code

    torch.set_num_threads(1)
    from llm_methods.mas2.isolation import available

    for mode in (*available(), "none"):
        t = time.perf_counter()
        for _ in range(10):
            run_code("print(sum(range(100)))", isolation=mode, allow_unisolated=True)
        print(
            f"sandbox ({mode}): {10 / (time.perf_counter() - t):.1f} runs/s (one subprocess each)"
        )
    pool = load_pool()
    grader = Grader(allow_unisolated=True)  # our own reference / mutant programs
    agent = SimAgent(pool, grader)
    train = generate_arith(20, 100) + generate_code(20, 100)
    test = generate_arith(30, 200) + generate_code(30, 200)
    grader.prefetch([j for task in train + test for j in agent.programs(task)])
    team = Team.uniform(pool.names)
    t = time.perf_counter()
    train_cto(team, train, agent, grader, pool, CTOConfig(rounds=3), seed=0)
    print(f"CTO: 3 rounds on {len(train)} tasks in {time.perf_counter() - t:.1f} s")
    rows = {
        name: evaluate(name, team, test, agent, grader, pool, 2, 7)
        for name in ("fixed", "mas2_cto")
    }
    print("| system | success | tokens/task | $/1k tasks | tokens × fixed | cost × fixed |")
    print("|---|---:|---:|---:|---:|---:|")
    f = rows["fixed"]
    for name, r in rows.items():
        print(
            f"| {name} | {r['success']:.3f} | {r['tokens']:.0f} | {r['cost'] * 1000:.2f} | "
            f"{r['tokens'] / f['tokens']:.2f} | {r['cost'] / f['cost']:.3f} |"
        )


if __name__ == "__main__":
    main()
