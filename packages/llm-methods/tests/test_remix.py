"""ReMix / GRPO: data readers, rewards, advantages, the Mix-PPG clip, KL-Convex schedule,
replay, UTD and reincarnation on a tiny untrained policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from llm_methods.lm.errors import LMError
from llm_methods.remix.data import (
    exact_match_reward,
    extract_answer,
    make_reward_fn,
    read_problems,
    records_to_problems,
    sft_texts,
    synth_problems,
    write_gsm8k,
)
from llm_methods.remix.model import (
    RLConfig,
    group_advantages,
    grpo_loss,
    kl_convex_lambda,
    mix_ppg_loss,
)
from llm_methods.remix.runner import RLRunner, collate_rollouts


def test_synth_roundtrip_and_exact_answers(tmp_path: Path) -> None:
    records = synth_problems(30, seed=3)
    path = write_gsm8k(records, tmp_path / "p.jsonl")
    problems = read_problems(path)
    assert len(problems) == 30
    for rec, p in zip(records, problems, strict=True):
        assert p.answer == rec["answer"].rsplit("####", 1)[1].strip()
        a, op, b = p.solution.split()[:3]  # "a + b = c."
        assert int(p.answer) == (int(a) + int(b) if op == "+" else int(a) - int(b))
    assert synth_problems(5, seed=1) == synth_problems(5, seed=1) != synth_problems(5, seed=2)
    prompts = [prompt for prompt, _ in sft_texts(problems)]
    assert all(prompt.startswith("Q: ") and prompt.endswith("\nA:") for prompt in prompts)


@pytest.mark.parametrize(
    ("text", "gold", "reward"),
    [
        (" 3 + 4 = 7. #### 7", "7", 1.0),
        (" #### 07", "7", 1.0),
        (" #### 8", "7", 0.0),
        ("it is 12", "12", 1.0),
        ("no number", "3", 0.0),
        (" 5 - 9 = -4. #### -4", "-4", 1.0),
        (" #### 7 then 8", "7", 1.0),
        ("", "0", 0.0),
    ],
)
def test_exact_match_reward(text: str, gold: str, reward: float) -> None:
    assert exact_match_reward(text, gold) == reward
    assert extract_answer(" #### 1,234") == "1"  # integers only, no thousands separators


def test_reader_errors_name_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q?", "answer": "#### 1"}\n{"question": "no answer"}\n')
    with pytest.raises(LMError, match=r"bad.jsonl:2: missing field 'answer'"):
        read_problems(bad)
    bad.write_text('{"question": "q?", "answer": "#### one"}\n')
    with pytest.raises(LMError, match=r"bad.jsonl:1: field 'answer' has no integer"):
        read_problems(bad)
    bad.write_text("{not json\n")
    with pytest.raises(LMError, match=r"bad.jsonl:1: not valid JSON"):
        read_problems(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(LMError, match="empty reward set"):
        read_problems(empty)
    with pytest.raises(LMError, match="no such file"):
        read_problems(tmp_path / "missing.jsonl")


def test_empty_reward_set_is_one_clear_error() -> None:
    with pytest.raises(LMError, match="empty reward set"):
        make_reward_fn([])
    with pytest.raises(LMError, match="empty reward set"):
        group_advantages(torch.empty(0), 4)
    with pytest.raises(LMError, match="unknown reward"):
        make_reward_fn(["nope"])
    assert make_reward_fn(["exact_match", "format"])(" #### 3", "3") == pytest.approx(1.1)


def test_group_advantages_match_trl_formula() -> None:
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    adv = group_advantages(r, 4)
    g = r[:4]
    assert torch.allclose(adv[:4], (g - g.mean()) / (g.std() + 1e-4))
    assert torch.all(adv[4:] == 0)  # identical rewards: no signal
    assert abs(float(adv[:4].sum())) < 1e-5


@pytest.mark.parametrize(
    ("t", "lam"),
    [
        (0, 1.0),
        (50, 1.0),
        (51, 0.9),
        (60, 0.9),
        (61, 0.8),
        (80, 0.7),
        (99, 0.5),
        (100, 0.5),
        (500, 0.5),
    ],
)
def test_kl_convex_lambda_schedule(t: int, lam: float) -> None:
    assert kl_convex_lambda(t) == pytest.approx(lam)


def test_mix_ppg_equals_grpo_on_policy_and_clips_around_behaviour_ratio() -> None:
    torch.manual_seed(0)
    B, C = 6, 5
    mask = torch.ones(B, C)
    mask[0, 3:] = 0
    old = -torch.rand(B, C) - 0.5
    adv = torch.randn(B)
    logps = (old + 0.3 * torch.randn(B, C)).requires_grad_()
    ref = old + 0.1 * torch.randn(B, C)
    a, _ = grpo_loss(logps, old, adv, mask, 0.2, beta=0.04, ref_logps=ref)
    b, _ = mix_ppg_loss(logps, old, old, adv, mask, 0.2, beta=0.04, base_logps=ref, lam=1.0)
    assert torch.allclose(a, b, atol=1e-7)
    # off-policy row: behaviour pi_{k-i}, pi_k = behaviour * 1.5; rho = 1.6 sits inside
    # [1.5 - 0.2, 1.5 + 0.2] (gradient flows) although a clip around 1 would stop it
    behaviour = torch.full((1, 1), -1.0)
    current = behaviour + torch.log(torch.tensor(1.5))
    theta = (behaviour + torch.log(torch.tensor(1.6))).requires_grad_()
    loss, _ = mix_ppg_loss(theta, behaviour, current, torch.ones(1), torch.ones(1, 1), 0.2)
    loss.backward()
    assert float(theta.grad.abs()) > 0.1
    theta2 = (behaviour + torch.log(torch.tensor(1.8))).requires_grad_()  # beyond c + eps
    loss2, stats = mix_ppg_loss(theta2, behaviour, current, torch.ones(1), torch.ones(1, 1), 0.2)
    loss2.backward()
    assert float(theta2.grad.abs()) == 0.0 and stats["clip_frac"] == 1.0
    assert float(loss2.detach()) == pytest.approx(-1.7, abs=1e-5)  # -min(1.8, clip = 1.7) * A


def test_kl_convex_mixes_base_and_previous_policy() -> None:
    logps = torch.zeros(1, 2, requires_grad=True)
    zero, mask = torch.zeros(1), torch.ones(1, 2)
    base, prev = torch.full((1, 2), -0.5), torch.full((1, 2), 0.3)
    k3 = lambda q: torch.exp(q) - q - 1  # noqa: E731
    for lam in (1.0, 0.7, 0.5):
        loss, _ = mix_ppg_loss(
            logps,
            logps.detach(),
            logps.detach(),
            zero,
            mask,
            beta=1.0,
            base_logps=base,
            prev_logps=prev,
            lam=lam,
        )
        want = lam * k3(torch.tensor(-0.5)) + (1 - lam) * k3(torch.tensor(0.3))
        assert float(loss) == pytest.approx(float(want), abs=1e-6)


@pytest.fixture(scope="module")
def tiny_policy():  # type: ignore[no-untyped-def]
    from llm_methods.zoo.models import tiny_lm

    texts = [p + r for p, r in sft_texts(records_to_problems(synth_problems(40, 0)))]
    return tiny_lm(texts, vocab_size=300, n_layers=1, hidden=32, heads=2, seed=0)


def test_runner_grpo_and_remix_counts_replay_reincarnation(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    import copy

    problems = records_to_problems(synth_problems(8, 1))
    reward = make_reward_fn(["exact_match"])
    torch.manual_seed(0)
    model = copy.deepcopy(tiny_policy.model)
    cfg = RLConfig(
        algo="remix",
        group_size=3,
        max_new_tokens=4,
        p_off=1.0,
        utd=2,
        n_past=2,
        reincarnate_at=3,
        lam_start=1,
        lam_every=1,
        lr=1e-3,
    )
    runner = RLRunner(model, tiny_policy.tokenizer, cfg, reward, seed=0)
    before = copy.deepcopy(runner.base.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    logs = [runner.step(problems[:2], opt) for _ in range(5)]
    # iteration 0: replay empty, 2 fresh groups; iteration 1: p = 1, both slots from the replay
    # and no fresh rollouts; T = 3 gradient steps is passed after iteration 1 (2 + 2 steps), so
    # iterations 2-4 are on-policy with one step each
    assert [x["fresh_rollouts"] for x in logs] == [6.0, 0.0, 6.0, 6.0, 6.0]
    assert runner.rollouts == 4 * 2 * 3
    assert runner.grad_steps == 2 * 2 + 3 * 1
    assert [x["off_policy_groups"] for x in logs] == [0.0, 2.0, 0.0, 0.0, 0.0]
    # lambda(t), t = gradient step: the last step of each iteration, t = 1, 3, 4, 5, 6
    assert logs[0]["lam"] == 1.0
    assert [x["lam"] for x in logs[1:]] == pytest.approx([0.8, 0.7, 0.6, 0.5])
    assert len(runner.replay) == 0 and runner.reincarnated  # cleared at reincarnation
    changed = any(not torch.equal(v, runner.base.state_dict()[k]) for k, v in before.items())
    assert changed  # the base was replaced by pi_T
    grpo = RLRunner(
        copy.deepcopy(tiny_policy.model),
        tiny_policy.tokenizer,
        RLConfig(algo="grpo", group_size=3, max_new_tokens=4, num_iterations=2),
        reward,
    )
    opt = torch.optim.AdamW(grpo.model.parameters(), lr=1e-3)
    out = grpo.step(problems[:2], opt)
    assert grpo.rollouts == 6 and grpo.grad_steps == 2 and out["off_policy_groups"] == 0.0
    assert 0.0 <= grpo.evaluate(problems)["accuracy"] <= 1.0


def _length_reward(text: str, gold: str) -> float:
    return float(len(text))  # rewards differ within a group: non-zero advantages


def _remix_runner(tiny_policy, reward=_length_reward, **config):  # type: ignore[no-untyped-def]
    """An ``RLRunner`` (seed 0) of a copy of ``tiny_policy``: ReMix with ``config``, no
    reincarnation and beta 0 unless ``config`` says otherwise."""
    import copy

    cfg = RLConfig(**{"algo": "remix", "reincarnate_at": None, "beta": 0.0, **config})
    return RLRunner(copy.deepcopy(tiny_policy.model), tiny_policy.tokenizer, cfg, reward, seed=0)


def test_remix_trains_on_every_fresh_rollout_it_samples(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    """Issue 27: fresh groups replaced by replay groups were sampled (and counted) but not
    trained on, so ReMix paid GRPO's rollouts per iteration. Now p = 0.5 of the 4 slots come
    from the replay and only the other 2 prompts are sampled, every one of them trained on."""
    problems = records_to_problems(synth_problems(8, 1))
    runner = _remix_runner(tiny_policy, group_size=2, max_new_tokens=3, p_off=0.5, utd=2, n_past=2)
    opt = torch.optim.AdamW(runner.model.parameters(), lr=1e-3)
    logs = [runner.step(problems[4 * i : 4 * i + 4], opt) for i in range(2)]
    assert logs[0]["fresh_rollouts"] == logs[0]["fresh_trained"] == 8.0  # replay empty
    assert logs[1]["fresh_rollouts"] == logs[1]["fresh_trained"] == 4.0
    assert logs[1]["off_policy_groups"] == 2.0 and logs[1]["trained_rows"] == 8.0
    assert runner.rollouts == 8 + 4  # GRPO would have sampled 16


def test_replay_path_trains_on_replayed_groups(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    """With p = 1 the second iteration's batch is replay groups only: the update must move the
    policy up the advantage-weighted log-likelihood of those replayed completions."""
    problems = records_to_problems(synth_problems(4, 3))
    runner = _remix_runner(
        tiny_policy, group_size=4, max_new_tokens=4, p_off=1.0, utd=1, n_past=1, epsilon=10.0
    )
    runner.step(problems[:2], torch.optim.SGD(runner.model.parameters(), lr=0.0))
    replayed = [r for g in runner.replay[0] for r in g]
    assert any(abs(r.advantage) > 0 for r in replayed)
    batch = collate_rollouts(replayed, tiny_policy.tokenizer.pad_token_id)

    def objective() -> float:
        with torch.no_grad():
            lp = runner._logps(runner.model, batch) * batch["completion_mask"]
        return float(
            (lp.sum(1) / batch["completion_mask"].sum(1).clamp(min=1) * batch["advantages"]).sum()
        )

    before = objective()
    logs = runner.step(problems[:2], torch.optim.SGD(runner.model.parameters(), lr=0.5))
    assert logs["fresh_rollouts"] == 0.0 and logs["off_policy_groups"] == 2.0
    assert runner.rollouts == 8 and runner.grad_steps == 2
    assert objective() > before + 1e-3


def test_zero_std_groups_logged_and_swapped_only_for_informative_replay(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    """Review #15: with no replay group of differing rewards the old swap fell back to a
    zero-spread replay group (as useless as the fresh one, and its fresh rollouts were then not
    trained on). Now: swapped only for an informative replay group, else skipped."""
    problems = records_to_problems(synth_problems(4, 4))
    counter = {"n": 0}

    def spread_then_flat(text: str, gold: str) -> float:
        counter["n"] += 1
        return float(counter["n"]) if counter["n"] <= 4 else 1.0

    cases = [
        (False, lambda text, gold: 1.0, 0.0),
        (True, lambda text, gold: 1.0, 0.0),
        (True, spread_then_flat, 2.0),
    ]
    for swap, reward, swapped in cases:
        counter["n"] = 0
        runner = _remix_runner(
            tiny_policy,
            reward,
            group_size=2,
            max_new_tokens=3,
            p_off=0.0,
            utd=1,
            replay_zero_std=swap,
        )
        opt = torch.optim.SGD(runner.model.parameters(), lr=0.0)
        first, second = (runner.step(problems[:2], opt) for _ in range(2))
        assert second["zero_std_frac"] == 1.0
        assert first["zero_std_swapped"] == 0.0  # nothing in the replay yet
        assert second["zero_std_swapped"] == swapped, (swap, swapped)
        assert second["fresh_trained"] == 4.0 - 2 * swapped


def test_replay_keeps_last_n_policies(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    problems = records_to_problems(synth_problems(4, 2))
    runner = _remix_runner(
        tiny_policy, make_reward_fn(["exact_match"]), group_size=2, max_new_tokens=3, n_past=2
    )
    opt = torch.optim.SGD(runner.model.parameters(), lr=0.0)
    for _ in range(4):
        runner.step(problems[:1], opt)
    assert [g[0][0].version for g in runner.replay] == [2, 3]
    # behaviour log-probs were taken under the sampling policy (lr 0: unchanged policy)
    r = runner.replay[-1][0][0]
    assert r.behaviour.shape == (len(r.completion),) and torch.all(r.behaviour <= 0)


def test_config_validation() -> None:
    """Checked on construction (issue 29): one line naming the field."""
    with pytest.raises(LMError, match=r"rl\.p_off must be in \[0, 1\], got 1\.5"):
        RLConfig(p_off=1.5)
    with pytest.raises(LMError, match=r"rl\.group_size must be >= 2"):
        RLConfig(group_size=1)
    with pytest.raises(LMError, match=r"rl\.algo must be"):
        RLConfig(algo="ppo")
    for name, bad in (("n_past", 0), ("lr", 0.0), ("temperature", -1.0), ("beta", -0.1)):
        with pytest.raises(LMError, match=rf"rl\.{name} must be"):
            RLConfig(**{name: bad})


def test_write_gsm8k_is_readable_json(tmp_path: Path) -> None:
    path = write_gsm8k(synth_problems(3, 0), tmp_path / "sub" / "x.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert {"question", "answer", "steps"} <= set(rows[0])


def test_on_policy_step_reuses_the_rollout_logps_with_the_same_numbers(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    """The speed-up: an on-policy step's pi_old is the rollout's own forward (same batch, same
    model), not a second one; a run with the reuse switched off (the forward recomputed) logs
    the same losses and ends with the same weights."""
    import copy

    problems = records_to_problems(synth_problems(8, 1))
    reward = make_reward_fn(["exact_match"])
    cfg = RLConfig(algo="grpo", group_size=3, max_new_tokens=4, beta=0.04)
    runs = []
    for reuse in (True, False):
        torch.manual_seed(0)
        runner = RLRunner(copy.deepcopy(tiny_policy.model), tiny_policy.tokenizer, cfg, reward)
        calls = []
        real = runner._logps

        def counted(model, batch, real=real, calls=calls):  # type: ignore[no-untyped-def]
            calls.append(1)
            return real(model, batch)

        runner._logps = counted  # type: ignore[method-assign]
        if not reuse:
            real_rollout = runner.rollout

            def rollout(problems, real_rollout=real_rollout, runner=runner):  # type: ignore[no-untyped-def]
                out = real_rollout(problems)
                runner._fresh_logps = None  # forget it: step() recomputes pi_old
                return out

            runner.rollout = rollout  # type: ignore[method-assign]
        opt = torch.optim.AdamW(runner.model.parameters(), lr=1e-2)
        logs = [runner.step(problems[:2], opt) for _ in range(3)]
        runs.append((logs, runner.model.state_dict(), len(calls)))
    (logs_a, state_a, calls_a), (logs_b, state_b, calls_b) = runs
    assert calls_b - calls_a == 3  # one forward fewer per on-policy step
    assert [x["loss"] for x in logs_a] == [x["loss"] for x in logs_b]
    assert all(torch.equal(v, state_b[k]) for k, v in state_a.items())
