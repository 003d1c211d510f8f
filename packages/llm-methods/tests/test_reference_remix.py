"""Reference check of ReMix's mix-policy clipped objective against a worked example done by hand
(issue 27 review #6). ReMix has no official code; the check is against the paper's equation.

Paper: *Squeeze the Soaked Sponge* (arXiv 2507.06892), Eq. (3), Mix-PPG. For a token sampled by
an earlier policy pi_{k-i} (i = 0 for the current batch), with r = pi_theta / pi_{k-i} and the
trust-region centre c = pi_k / pi_{k-i}:

    J = E_i E_{pi_{k-i}} [ min( r * A,  clip(r, c - eps, c + eps) * A ) ]

(GePPO's generalised clip, on which the paper builds; c = 1 gives PPO/GRPO's clip), aggregated
as GRPO: mean over a sequence's tokens, then mean over sequences. The numbers below were worked
out by hand from this equation (eps = 0.2), written as probabilities, and are not produced by
our function; the loss is -J.

Sequence 1, A = +1:
  t1: pi_{k-i} 0.5, pi_k 0.6 (c 1.2), pi_theta 0.75 (r 1.5): clip to [1.0, 1.4] -> 1.4;
      min(1.5, 1.4) = 1.4 (clipped: no gradient)
  t2: pi_{k-i} 0.5, pi_k 0.6 (c 1.2), pi_theta 0.45 (r 0.9): clip -> 1.0; min(0.9, 1.0) = 0.9
      (unclipped: d/d log pi_theta = r A = 0.9)
  t3: pi_{k-i} 0.4, pi_k 0.4 (c 1, on-policy), pi_theta 0.5 (r 1.25): clip to [0.8, 1.2] -> 1.2;
      min(1.25, 1.2) = 1.2 (clipped)
  sequence mean 3.5 / 3
Sequence 2, A = -2 (third token padding):
  t1: pi_{k-i} 0.2, pi_k 0.3 (c 1.5), pi_theta 0.36 (r 1.8): clip to [1.3, 1.7] -> 1.7;
      min(-3.6, -3.4) = -3.6 (unclipped: r A = -3.6)
  t2: pi_{k-i} 0.2, pi_k 0.3 (c 1.5), pi_theta 0.24 (r 1.2): clip -> 1.3; min(-2.4, -2.6) = -2.6
      (clipped)
  sequence mean -6.2 / 2 = -3.1
J = (3.5/3 - 3.1) / 2 = -0.966667, loss = 0.966667.
Gradient of the loss in log pi_theta: -(1/2)(1/3)(0.9) = -0.15 at (1, t2), -(1/2)(1/2)(-3.6) =
0.9 at (2, t1), 0 elsewhere. Tokens outside the trust region in the direction A pushes
(r > c + eps with A > 0, r < c - eps with A < 0): (1, t1), (1, t3), (2, t2): 3 of 5.

The same tokens under the two other readings, to show the test tells them apart: a clip around
1 (PPO) gives t1 of sequence 1 min(1.5, 1.2) = 1.2, not 1.4; a multiplicative clip
[c (1 - eps), c (1 + eps)] = [0.96, 1.44] gives 1.44.
"""

from __future__ import annotations

import math

import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from llm_methods.remix.model import mix_ppg_loss

EPS = 0.2
BEHAVIOUR = [[0.5, 0.5, 0.4], [0.2, 0.2, 1.0]]  # pi_{k-i}; the last entry is padding
CURRENT = [[0.6, 0.6, 0.4], [0.3, 0.3, 1.0]]  # pi_k
THETA = [[0.75, 0.45, 0.5], [0.36, 0.24, 1.0]]  # pi_theta
ADVANTAGES = [1.0, -2.0]
MASK = [[1, 1, 1], [1, 1, 0]]
EXPECTED_LOSS = -((1.4 + 0.9 + 1.2) / 3 + (-3.6 - 2.6) / 2) / 2
EXPECTED_GRAD = [[0.0, -0.15, 0.0], [0.9, 0.0, 0.0]]
#: Relative tolerance of the float64 loss and gradient against the hand-worked values: measured
#: 2.3e-16 (loss) and 2.5e-16 (gradient) on AMD EPYC (2026-12-06) under ATEN_CPU_CAPABILITY=default
#: (MKL_CBWR=COMPATIBLE; also with ONEDNN_MAX_CPU_ISA=SSE41, oneDNN's oldest kernels), avx2, avx512
#: and unset alike; 1e-12 is a float64 floor (> 1000x). PPO's clip around 1 (the trust-region centre
#: c dropped) moves the loss by 1.7e-2 and the gradient by 0.67.
TOL = 1e-12


def _log(values: list[list[float]]) -> torch.Tensor:
    return torch.tensor([[math.log(v) for v in row] for row in values], dtype=torch.float64)


def _loss(current: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Eq. (3) on the example with pi_k = ``current``: the loss, its gradient in log pi_theta
    and the statistics."""
    logps = _log(THETA).requires_grad_()
    loss, stats = mix_ppg_loss(
        logps,
        _log(BEHAVIOUR),
        _log(current),
        torch.tensor(ADVANTAGES, dtype=torch.float64),
        torch.tensor(MASK, dtype=torch.float64),
        eps_low=EPS,
    )
    loss.backward()
    return loss.detach(), logps.grad, stats


def test_mix_ppg_loss_matches_the_hand_worked_example_of_eq3() -> None:
    loss, grad, stats = _loss(CURRENT)
    assert float(loss) == pytest.approx(0.9666667, abs=1e-6)  # the number worked out above
    assert_portable_close(loss, EXPECTED_LOSS, tol=TOL, what="loss")
    assert_portable_close(grad, EXPECTED_GRAD, tol=TOL, what="gradient")
    assert stats["clip_frac"] == pytest.approx(3 / 5)
    # PPO's clip around 1 (pi_k = pi_{k-i}: the centre c dropped) moves both >= 10x the tol
    loss_m, grad_m, _ = _loss(BEHAVIOUR)
    assert_mutation_detected(loss_m, EXPECTED_LOSS, tol=TOL, what="loss, clip around 1")
    assert_mutation_detected(grad_m, EXPECTED_GRAD, tol=TOL, what="gradient, clip around 1")


def test_the_example_separates_the_clip_readings() -> None:
    """Sequence 1, t1 alone: 1.4 under Eq. (3)'s additive clip around c; 1.2 around 1; 1.44
    multiplicative. Our loss gives the first."""
    one = torch.ones(1, 1, dtype=torch.float64)
    loss, _ = mix_ppg_loss(
        _log([[0.75]]),
        _log([[0.5]]),
        _log([[0.6]]),
        torch.ones(1, dtype=torch.float64),
        one,
        eps_low=EPS,
    )
    assert float(loss) == pytest.approx(-1.4, abs=1e-9)
    assert abs(float(loss) + 1.2) > 0.1 and abs(float(loss) + 1.44) > 0.03


# --- KL-Convex (beta > 0), issue 41 -------------------------------------------------------------
# Paper Eq. (3) with the KL-Convex constraint, beta * (lam KL(pi_theta || pi_base) + (1 - lam)
# KL(pi_theta || pi_{k-1})), each KL estimated per token by k3(q) = q - ln q - 1 with q = pi_ref /
# pi_theta, times the importance ratio r = pi_theta / pi_{k-i} (TRL's use_bias_correction_kl:
# the tokens were sampled by pi_{k-i}), aggregated as the surrogate (mean over a sequence's
# tokens, then over sequences). Worked by hand on the example above, lam = 0.7, beta = 0.1:
#   pi_base = [[0.375, 0.45, 0.25], [0.36, 0.48, -]]: q_base = 0.5, 1, 0.5 | 1, 2
#   pi_prev = [[0.75, 0.9, 0.5], [0.18, 0.24, -]]:    q_prev = 1, 2, 1     | 0.5, 1
#   k3(1) = 0, k3(0.5) = ln 2 - 0.5 = 0.193147, k3(2) = 1 - ln 2 = 0.306853
#   sequence 1: 1.5 * 0.7 k3(0.5) = 0.202805, 0.9 * 0.3 k3(2) = 0.082850, 1.25 * 0.7 k3(0.5) =
#               0.169004; mean 0.151553
#   sequence 2: 1.8 * 0.3 k3(0.5) = 0.104300, 1.2 * 0.7 k3(2) = 0.257757; mean 0.181028
#   KL term 0.166290; loss = 0.966667 + 0.1 * 0.166290 = 0.983296.
BASE = [[0.375, 0.45, 0.25], [0.36, 0.48, 1.0]]
PREV = [[0.75, 0.9, 0.5], [0.18, 0.24, 1.0]]
BETA, LAM = 0.1, 0.7
_K3_HALF, _K3_TWO = math.log(2) - 0.5, 1 - math.log(2)
KL_TERM = (
    (1.5 * LAM * _K3_HALF + 0.9 * (1 - LAM) * _K3_TWO + 1.25 * LAM * _K3_HALF) / 3
    + (1.8 * (1 - LAM) * _K3_HALF + 1.2 * LAM * _K3_TWO) / 2
) / 2
EXPECTED_KL_LOSS = EXPECTED_LOSS + BETA * KL_TERM


def _kl_loss(beta: float = BETA, lam: float = LAM, prev: list[list[float]] = PREV) -> float:
    loss, _ = mix_ppg_loss(
        _log(THETA),
        _log(BEHAVIOUR),
        _log(CURRENT),
        torch.tensor(ADVANTAGES, dtype=torch.float64),
        torch.tensor(MASK, dtype=torch.float64),
        eps_low=EPS,
        beta=beta,
        base_logps=_log(BASE),
        prev_logps=_log(prev),
        lam=lam,
    )
    return float(loss)


def test_kl_convex_term_matches_the_hand_worked_example() -> None:
    """beta > 0 (issue 41: the KL-Convex term was not exercised; multiplying it by 0 passed).
    Tolerance: the float64 floor of the test above (measured 3.4e-16 here under
    ATEN_CPU_CAPABILITY=default and avx2 with MKL_CBWR=COMPATIBLE, and unset). The mutations:
    the term dropped (beta 0) moves the loss by 1.7e-2 relative, lam and 1 - lam swapped by
    1.9e-3, the previous policy replaced by the base (a plain KL to the base) by 1.5e-3, all
    far above 10x the tolerance."""
    assert _kl_loss() == pytest.approx(0.983296, abs=1e-6)  # the number worked out above
    assert_portable_close(_kl_loss(), EXPECTED_KL_LOSS, tol=TOL, what="loss with KL-Convex")
    for mutated, what in (
        (_kl_loss(beta=0.0), "KL term dropped"),
        (_kl_loss(lam=1 - LAM), "lam and 1 - lam swapped"),
        (_kl_loss(prev=BASE), "KL to the base only"),
    ):
        assert_mutation_detected(mutated, EXPECTED_KL_LOSS, tol=TOL, what=what)
