"""ReMix vs our GRPO vs TRL's ``GRPOTrainer`` (peer; ``num_iterations`` = mu for UTD-like reuse)
on the same task model, pool, group size, lr, beta and clip: rollouts per second, gradient
steps per rollout, and rollouts until the greedy pool accuracy first reaches ``--target``.

``OMP_NUM_THREADS=1 uv run --no-sync python packages/llm-methods/benchmarks/bench_remix.py``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import torch

from llm_methods.lm import load_lm
from llm_methods.remix.data import exact_match_reward, records_to_problems, synth_problems
from llm_methods.remix.experiment import POOL_SEED, rl_config, run_curve
from llm_methods.remix.pretrain import TaskModelSpec, ensure_task_model


def first_reach(curve: dict[str, list], target: float) -> float:
    for r, a in zip(curve["rollouts"], curve["accuracy"], strict=True):
        if r > 0 and a >= target:
            return float(r)
    return float("inf")


def run_trl(
    folder: str, pool: list, iterations: int, mu: int, eval_every: int, seed: int, use_cpu: bool
) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from llm_methods.remix.model import RLConfig
    from llm_methods.remix.runner import RLRunner

    cfg = rl_config("grpo")
    tok = load_lm(folder, device="cpu").tokenizer  # the tokenizer only
    bos = tok.bos_token  # our prompts start with BOS; TRL tokenises without special tokens
    rows = [pool[i % len(pool)] for i in range(iterations * cfg.prompts_per_step)]
    data = Dataset.from_dict(
        {"prompt": [bos + p.prompt for p in rows], "answer": [p.answer for p in rows]}
    )

    def reward(completions: list[str], answer: list[str], **_: Any) -> list[float]:
        return [exact_match_reward(c, a) for c, a in zip(completions, answer, strict=True)]

    batch = cfg.prompts_per_step * cfg.group_size
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=batch,
        num_generations=cfg.group_size,
        max_completion_length=cfg.max_new_tokens,
        num_iterations=mu,
        loss_type="grpo",
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=cfg.max_grad_norm,
        temperature=cfg.temperature,
        top_k=0,
        top_p=1.0,
        max_steps=iterations * mu,
        report_to="none",
        use_cpu=use_cpu,
        save_strategy="no",
        logging_steps=10**6,
        seed=seed,
        bf16=False,
        disable_tqdm=True,
        shuffle_dataset=False,
    )
    curve: dict[str, list] = {"rollouts": [], "accuracy": []}

    class Eval(TrainerCallback):
        def on_step_end(self, a, state, control, model=None, **kw):  # type: ignore[no-untyped-def]
            if state.global_step % (eval_every * mu) == 0:
                runner = RLRunner(model, tok, RLConfig(algo="grpo"), lambda t, g: 0.0)
                model.eval()
                curve["rollouts"].append(state.global_step // mu * batch)
                curve["accuracy"].append(runner.evaluate(pool)["accuracy"])
                model.train()

    trainer = GRPOTrainer(
        model=folder,
        reward_funcs=reward,
        args=args,
        train_dataset=data,
        processing_class=tok,
        callbacks=[Eval()],
    )
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    return {
        "curve": curve,
        "rollouts": iterations * batch,
        "grad_steps": iterations * mu,
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=48, help="rollout batches per run")
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--target", type=float, default=0.66, help="greedy pool accuracy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="cpu / cuda (default: CUDA when present)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = str(ensure_task_model(TaskModelSpec()))
    lm = load_lm(folder, args.device, "float32")  # the peer runs on the same device
    pool = records_to_problems(synth_problems(64, POOL_SEED, TaskModelSpec().max_value))
    rows = {}
    for algo in ("grpo", "remix"):
        rows[f"ours {algo}"] = run_curve(
            lm.model, lm.tokenizer, algo, pool, args.seed, args.iterations, args.eval_every
        )
    for mu in (1, 2):
        rows[f"TRL GRPO mu={mu}"] = run_trl(
            folder, pool, args.iterations, mu, args.eval_every, args.seed, lm.device.type == "cpu"
        )
    load = os.getloadavg()[0]
    print(
        f"{args.iterations} iterations x 64 rollouts, target greedy pool accuracy "
        f"{args.target}; load average {load:.2f}"
    )
    base = rows["ours grpo"]["rollouts"] / rows["ours grpo"]["wall_s"]
    print(
        "| run | rollouts/s | vs our GRPO | grad steps / rollout | rollouts to target | final acc |"
    )
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        rate = r["rollouts"] / r["wall_s"]
        reach = first_reach(r["curve"], args.target)
        print(
            f"| {name} | {rate:.0f} | {rate / base:.2f}x | {r['grad_steps'] / r['rollouts']:.4f} "
            f"| {'not reached' if reach == float('inf') else int(reach)} "
            f"| {r['curve']['accuracy'][-1]:.3f} |"
        )


if __name__ == "__main__":
    main()
