"""Using a trained denoiser: deletion scoring by the reverse path, shrinking, generation.

All functions take any denoiser with the interface of :class:`bio_scisor.model.ScisorDenoiser`
(tokens (B, n), lengths (B,), S (B,) -> log q (B, n)); sequences longer than its
``window_size`` are windowed as upstream (:mod:`bio_scisor.windows`). The training objective
and the Monte-Carlo ELBO scorer are in :mod:`bio_scisor.elbo`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from bio_scisor.constants import ALPHA_POWER, AMINO_ACIDS, BACKGROUND, T_MAX
from bio_scisor.insertion import alpha, beta, gamma_sample, pad_batch, redraw_zero
from bio_scisor.io import encode, is_deletion_of
from bio_scisor.windows import denoiser_log_q

__all__ = [
    "generate",
    "greedy_shrink_path",
    "greedy_shrink_positions",
    "score_path",
    "shrink",
    "shrink_positions",
    "shrink_step",
]


def _tokens(seqs: Sequence[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, lengths = pad_batch([torch.from_numpy(encode(s)) for s in seqs])
    return tokens.to(device), lengths.to(device)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def _log_q(
    model: nn.Module,
    items: list[tuple[str, int]],
    batch_size: int,
    mode: str = "average",
    generator: torch.Generator | None = None,
) -> list[np.ndarray]:
    """log q(. | seq, S) for (seq, S) items, batched; long sequences windowed (``mode``)."""
    device = _device(model)
    out: list[np.ndarray] = []
    for i in range(0, len(items), batch_size):
        chunk = items[i : i + batch_size]
        tokens, lengths = _tokens([seq for seq, _ in chunk], device)
        s = torch.tensor([k for _, k in chunk], device=device)
        log_q = denoiser_log_q(model, tokens, lengths, s, mode, generator).cpu().numpy()
        out.extend(row[: len(seq)] for row, (seq, _) in zip(log_q, chunk, strict=True))
    return out


@torch.no_grad()
def score_path(
    model: nn.Module,
    wt: str,
    mutants: Sequence[str],
    batch_size: int = 64,
    *,
    quiet: bool = True,
) -> np.ndarray:
    """Scoring (a): log q_theta(reverse path X_wt -> mutant), (N,) float64.

    For a deletion of d residues this is the log of the sum, over every ordered sequence of d
    single-residue deletions that turns the WT into the mutant, of the product of the per-step
    probabilities q_theta(k | X, S = d - step). Identical children (deletions inside a run of equal
    residues) are merged, so ambiguous positions are summed. All single deletions share one
    forward pass (X_wt, S=1); each further level is one batched pass over the distinct states.

    ``quiet=False`` shows progress on stderr (:func:`iclr26_common.progress.progress`), one bar
    per deletion step over its model passes (batches of ``batch_size`` states) and the variants
    expanded; the batches, and so the scores, are the same either way.
    """
    from iclr26_common.progress import progress

    model.eval()
    for m in mutants:
        if not is_deletion_of(m, wt):
            raise ValueError(f"mutant of length {len(m)} is not a deletion of the wild type")
    depth = [len(wt) - len(m) for m in mutants]
    n_steps = max(depth, default=0)
    states: list[dict[str, float]] = [{wt: 0.0} for _ in mutants]
    cache: dict[tuple[str, int], np.ndarray] = {}
    for level in range(n_steps):
        needed = sorted(
            {
                (seq, depth[i] - level)
                for i, st in enumerate(states)
                if depth[i] > level
                for seq in st
            }
            - set(cache)
        )
        # the model passes over this step's states, then the variants still being expanded
        work = [("pass", b) for b in range(0, len(needed), batch_size)]
        work += [("variant", i) for i in range(len(states)) if depth[i] > level]
        description = f"path score, deletion step {level + 1}/{n_steps}"
        for kind, k in progress(work, description=description, quiet=quiet):
            if kind == "pass":
                chunk = needed[k : k + batch_size]
                cache.update(zip(chunk, _log_q(model, chunk, batch_size), strict=True))
            else:
                states[k] = _expand(states[k], mutants[k], depth[k] - level, cache)
    return np.array([st[m] for st, m in zip(states, mutants, strict=True)], dtype=np.float64)


def _expand(
    state: dict[str, float], mutant: str, s: int, cache: dict[tuple[str, int], np.ndarray]
) -> dict[str, float]:
    """One reverse step of :func:`score_path` for one variant: every child of its current
    sequences that can still reach ``mutant``, with the summed path log-probability."""
    nxt: dict[str, float] = {}
    for seq, logp in state.items():
        log_q = cache[(seq, s)]
        for k in range(len(seq)):
            child = seq[:k] + seq[k + 1 :]
            if child != mutant and not is_deletion_of(mutant, child):
                continue
            value = logp + float(log_q[k])
            nxt[child] = np.logaddexp(nxt[child], value) if child in nxt else value
    return nxt


@torch.no_grad()
def shrink_positions(
    model: nn.Module,
    seq: str,
    pct: float,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[str, list[int]]:
    """Remove k = ceil(L * pct / 100) residues in k reverse steps, step r conditioned on S = k - r.

    Each step samples one position from softmax(log q / temperature); ``temperature=0`` takes the
    arg-max (top-1). Returns the shrunk sequence and the deleted positions (0-based, in the
    input's coordinates, sorted), as upstream ``shrink_sequence`` / ``preserved_indices``.
    """
    if not 0 < pct < 100:
        raise ValueError(f"pct must be in (0, 100), got {pct}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    model.eval()
    k = math.ceil(len(seq) * pct / 100)
    if k >= len(seq):
        raise ValueError(f"removing {k} of {len(seq)} residues leaves nothing")
    kept = list(range(len(seq)))
    for r in range(k):
        pos = _sample_position(model, seq, k - r, temperature, generator)
        seq = seq[:pos] + seq[pos + 1 :]
        del kept[pos]
    deleted = sorted(set(range(len(kept) + k)) - set(kept))
    return seq, deleted


def greedy_shrink_positions(
    score: Callable[[str, list[str]], np.ndarray], seq: str, pct: float
) -> tuple[str, list[int]]:
    """Model-guided greedy shrinking with any variant scorer (the comparators of SCISOR's
    top-1 shrinking): k = ceil(L * pct / 100) steps, each deleting the residue whose single
    deletion ``score(current, singles)`` (higher = better, e.g. the AR LM's or the profile HMM's
    ``score``) ranks first (the first position on ties). Returns the shrunk sequence and the
    deleted positions in the input's coordinates (as :func:`shrink_positions`)."""
    return greedy_shrink_path(score, seq, [pct])[pct]


def greedy_shrink_path(
    score: Callable[[str, list[str]], np.ndarray], seq: str, pcts: Sequence[float]
) -> dict[float, tuple[str, list[int]]]:
    """:func:`greedy_shrink_positions` at each of ``pcts`` from one greedy path: a step depends
    only on the sequence so far, so the run to the largest k passes through every smaller
    one's result (the same scorer calls, the same numbers), and its prefixes are read off."""
    steps = {}
    for pct in pcts:
        if not 0 < pct < 100:
            raise ValueError(f"pct must be in (0, 100), got {pct}")
        steps[pct] = math.ceil(len(seq) * pct / 100)
        if steps[pct] >= len(seq):
            raise ValueError(f"removing {steps[pct]} of {len(seq)} residues leaves nothing")
    if not steps:
        return {}
    n, last = len(seq), max(steps.values())
    kept = list(range(n))
    at: dict[int, tuple[str, list[int]]] = {}
    for step in range(last + 1):
        if step in steps.values():
            at[step] = (seq, sorted(set(range(n)) - set(kept)))
        if step == last:
            break
        singles = [seq[:i] + seq[i + 1 :] for i in range(len(seq))]
        pos = int(np.argmax(np.asarray(score(seq, singles))))
        seq = singles[pos]
        del kept[pos]
    return {pct: at[k] for pct, k in steps.items()}


def shrink(
    model: nn.Module,
    seq: str,
    pct: float,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> str:
    """:func:`shrink_positions` without the positions: the shrunk sequence."""
    return shrink_positions(model, seq, pct, temperature, generator)[0]


@torch.no_grad()
def generate(
    model: nn.Module,
    length: int,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    power: float = ALPHA_POWER,
    t_max: float = T_MAX,
) -> tuple[str, list[float]]:
    """Generation from scratch: X_{t_max} ~ random sequence of length L + S from pi, S ~
    NegBinomial(L+1, 1 - alpha(t_max)) (0 redrawn as in training), then S reverse deletions.

    Deletion times follow an exponential clock run backwards from t_max: with r insertions left
    at time t the next deletion waits Exp(r * beta(t)) (clipped at 0). The denoiser conditions on
    S only, so the times are returned for inspection. Returns (sequence, deletion times).
    """
    t_end = torch.tensor([t_max], dtype=torch.float64)
    a = float(alpha(t_end, power))
    rate = gamma_sample(torch.tensor([length + 1.0], dtype=torch.float64), generator)
    s = int(torch.poisson(rate * (1 - a) / a, generator=generator)[0])
    if s == 0:  # as in training: the negative binomial restricted to 1..S_REDRAW_MAX
        s = int(redraw_zero(torch.tensor([length]), torch.tensor([a]), generator)[0])
    pi = torch.as_tensor(BACKGROUND)
    idx = torch.multinomial(pi, length + s, replacement=True, generator=generator)
    seq = "".join(AMINO_ACIDS[i] for i in idx.tolist())
    times, t = [], t_max
    for r in range(s, 0, -1):
        wait = -math.log(1.0 - float(torch.rand(1, generator=generator))) / (
            r * float(beta(torch.tensor(t), power))
        )
        t = max(t - wait, 0.0)
        times.append(t)
        seq = shrink_step(model, seq, r, temperature, generator)
    return seq, times


def _sample_position(
    model: nn.Module, seq: str, s: int, temperature: float, generator: torch.Generator | None
) -> int:
    """One reverse step's position from q(. | seq, S=s) (a random window for long sequences,
    as upstream ``p_sample``); ``temperature=0`` takes the arg-max."""
    (log_q,) = _log_q(model, [(seq, s)], 1, "random", generator)
    if temperature == 0:
        return int(np.argmax(log_q))
    probs = torch.softmax(torch.from_numpy(log_q) / temperature, dim=0)
    return int(torch.multinomial(probs, 1, generator=generator))


def shrink_step(
    model: nn.Module, seq: str, s: int, temperature: float, generator: torch.Generator | None
) -> str:
    """One reverse step: delete one position sampled from q(. | seq, S=s)."""
    pos = _sample_position(model, seq, s, temperature, generator)
    return seq[:pos] + seq[pos + 1 :]
