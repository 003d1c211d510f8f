"""Baselines for deletion scoring: a profile HMM (pyhmmer), a small autoregressive LM, random."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bio_scisor.constants import PAD_INDEX, VOCAB_SIZE
from bio_scisor.insertion import pad_batch
from bio_scisor.io import encode
from bio_scisor.model import sinusoidal

__all__ = ["CausalLM", "HmmScorer", "random_scores", "train_causal_lm"]

BOS_INDEX = VOCAB_SIZE  # begin-of-sequence token of the LM (its vocabulary is VOCAB_SIZE + 1)


class CausalLM(nn.Module):
    """Left-to-right transformer LM over residues + end token (PAD doubles as end-of-sequence).

    Same width/depth knobs as :class:`bio_scisor.model.ScisorDenoiser`, so the timing comparison
    is between equal-sized networks. ``log_prob(tokens, lengths)`` -> log p(X) (B,).
    """

    def __init__(self, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, d_ff: int = 128):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(VOCAB_SIZE + 1, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, n_heads, d_ff, 0.0, batch_first=True, norm_first=True
            )
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB_SIZE)

    def log_prob(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        bsz, n = tokens.shape
        inputs = torch.cat([torch.full((bsz, 1), BOS_INDEX, device=tokens.device), tokens], 1)
        targets = torch.cat([tokens, torch.full((bsz, 1), PAD_INDEX, device=tokens.device)], 1)
        pos = sinusoidal(torch.arange(n + 1, device=tokens.device), self.d_model)
        h = self.embed(inputs) + pos[None]
        mask = nn.Transformer.generate_square_subsequent_mask(n + 1, device=tokens.device)
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)
        logp = torch.log_softmax(self.head(self.norm(h)), -1)
        per_token = logp.gather(2, targets[:, :, None]).squeeze(2)
        valid = torch.arange(n + 1, device=tokens.device)[None, :] <= lengths[:, None]
        return (per_token * valid).sum(1)

    @torch.no_grad()
    def log_probs(self, seqs: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """log p(X) of each sequence, (N,) float64."""
        self.eval()
        device = next(self.parameters()).device
        out = []
        for i in range(0, len(seqs), batch_size):
            chunk = [torch.from_numpy(encode(s)) for s in seqs[i : i + batch_size]]
            tokens, lengths = pad_batch(chunk)
            out.append(self.log_prob(tokens.to(device), lengths.to(device)).double().cpu())
        return torch.cat(out).numpy()

    def score(self, wt: str, mutants: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """log p(mutant) - log p(WT), (N,) float64; one forward pass per sequence (batched)."""
        values = self.log_probs([wt, *mutants], batch_size)
        return values[1:] - values[0]


def train_causal_lm(
    sequences: Sequence[str],
    steps: int,
    batch_size: int = 16,
    lr: float = 1e-3,
    seed: int = 0,
    **kwargs: int,
) -> CausalLM:
    """Fit a :class:`CausalLM` by maximum likelihood (AdamW, ``steps`` minibatches)."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = CausalLM(**kwargs)
    optim = torch.optim.AdamW(model.parameters(), lr=lr)
    tokens = [torch.from_numpy(encode(s)) for s in sequences]
    model.train()
    for _ in range(steps):
        idx = torch.randint(len(tokens), (batch_size,), generator=gen).tolist()
        x, lengths = pad_batch([tokens[i] for i in idx])
        loss = -(model.log_prob(x, lengths) / (lengths + 1)).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
    return model.eval()


class HmmScorer:
    """Profile HMM built with pyhmmer (hmmbuild defaults) from an MSA.

    ``HmmScorer(msa_path)`` reads an A2M / Stockholm MSA; :meth:`from_homologs` builds the MSA the
    way a user would (ProteinGym's HMM baseline: hmmbuild on a jackhmmer alignment of the WT's
    homologs). ``score(wt, mutants)`` -> bit-score differences of the hmmsearch pipeline with all
    filters off. A sequence without any hit gets ``floor`` (``min(hit scores) - 1``; the count
    is returned by :meth:`bit_scores`).
    """

    def __init__(self, msa_path: str | Path, fmt: str = "a2m") -> None:
        from pyhmmer.easel import Alphabet, MSAFile

        alphabet = Alphabet.amino()
        with MSAFile(str(msa_path), format=fmt, digital=True, alphabet=alphabet) as handle:
            msa = handle.read()
        self._build(msa, alphabet)

    def _build(self, msa, alphabet) -> None:  # type: ignore[no-untyped-def]
        from pyhmmer.plan7 import Background, Builder

        self.alphabet = alphabet
        self.background = Background(alphabet)
        msa.name = b"family"
        self.n_msa = len(msa.sequences)
        self.hmm, _, _ = Builder(alphabet).build_msa(msa, self.background)

    @classmethod
    def from_homologs(cls, wt: str, homologs: Sequence[str], max_iterations: int = 5) -> HmmScorer:
        """jackhmmer (HMMER defaults: inclusion E <= 0.001, ``max_iterations`` rounds) with the
        WT as query against the unaligned ``homologs``, then hmmbuild on the final alignment of
        the included hits. ``n_msa`` is the number of aligned sequences."""
        from pyhmmer.easel import Alphabet, DigitalSequenceBlock, TextSequence
        from pyhmmer.hmmer import jackhmmer

        alphabet = Alphabet.amino()
        query = TextSequence(name=b"WT", sequence=wt).digitize(alphabet)
        db = DigitalSequenceBlock(
            alphabet,
            [
                TextSequence(name=f"h{i}".encode(), sequence=s).digitize(alphabet)
                for i, s in enumerate(homologs)
            ],
        )
        result = next(iter(jackhmmer(query, db, max_iterations=max_iterations, cpus=1)))
        included = sum(1 for hit in result.hits if hit.included)
        if included < 2:
            raise ValueError(f"jackhmmer included {included} homolog(s); need >= 2")
        msa = result.hits.to_msa(alphabet, trim=True, digitize=True)
        scorer = cls.__new__(cls)
        scorer._build(msa, alphabet)
        return scorer

    def bit_scores(self, seqs: Sequence[str]) -> tuple[np.ndarray, int]:
        from pyhmmer.easel import DigitalSequenceBlock, TextSequence
        from pyhmmer.plan7 import Pipeline

        block = DigitalSequenceBlock(
            self.alphabet,
            [
                TextSequence(name=str(i).encode(), sequence=s).digitize(self.alphabet)
                for i, s in enumerate(seqs)
            ],
        )
        pipeline = Pipeline(
            self.alphabet,
            background=self.background,
            bias_filter=False,
            F1=1.0,
            F2=1.0,
            F3=1.0,
            E=1e10,
            domE=1e10,
            T=-1e6,
            domT=-1e6,
        )
        scores = np.full(len(seqs), math.nan)
        for hit in pipeline.search_hmm(self.hmm, block):
            scores[int(hit.name)] = hit.score
        missing = int(np.isnan(scores).sum())
        if missing:
            floor = np.nanmin(scores) - 1.0 if missing < len(seqs) else 0.0
            scores[np.isnan(scores)] = floor
        return scores, missing

    def score(self, wt: str, mutants: Sequence[str]) -> np.ndarray:
        """bits(mutant) - bits(WT), (N,)."""
        scores, _ = self.bit_scores([wt, *mutants])
        return scores[1:] - scores[0]


def random_scores(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n)
