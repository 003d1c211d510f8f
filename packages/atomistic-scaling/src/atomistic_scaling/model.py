"""Neural force fields of rising symmetry order, one family with the same width/depth knobs.

* ``mpnn`` -- unconstrained message passing on raw relative vectors ``r_ij`` (translation
  invariant only; the paper's "MPNN"): the edge input is ``[r_ij, rbf(|r_ij|), r_ij ⊗
  rbf(|r_ij|)]`` (the outer product gives the MLP radially weighted Cartesian components; no
  symmetry is imposed, the MLP mixes the components freely); direct forces are an
  unconstrained linear map of the final node features to R³.
* ``invariant`` -- distance-only continuous-filter convolutions (SchNet-like; stands in for the
  paper's GemNet-OC, invariant); direct forces ``f_i = sum_j s_ij r̂_ij`` (equivariant).
* ``l1`` / ``l2`` / ``l3`` -- e3nn tensor-product message passing (NequIP-like) with node
  features up to ``ℓ_max`` = 1, 2, 3 (stand-ins for MC-EGNN and eSEN); direct forces are the
  ``1o`` output of an equivariant linear head.
* ``nequip`` -- the real NequIP, built by the ``nequip`` library (optional; ``l_max`` knob;
  :mod:`atomistic_scaling.peers`); always conservative.

Every model predicts the total energy ``E = sum_i (e_i + E0[z_i])`` (per-element references
``E0`` are a buffer fitted from the training set) and either direct forces (the paper's setting)
or conservative forces ``F = -dE/dpos`` (``conservative=True``), which also give the stress.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from atomistic_scaling._pyg import Batch, Data, MessagePassing, scatter
from atomistic_scaling.constants import ARCHITECTURES, MAX_Z, NEIGHBOR_NORM
from atomistic_scaling.graph import edge_vectors

__all__ = ["MAX_Z", "ForceField", "count_parameters"]


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters N."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class RadialBasis(nn.Module):
    """Bessel radial basis times the polynomial envelope (DimeNet, p = 6).

    ``b_n(r) = sqrt(2/c) sin(n π r / c) / r · u(r / c)``; input (E,), output (E, num_rbf).
    """

    def __init__(self, num_rbf: int, cutoff: float, p: int = 6) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.p = p
        self.register_buffer("freqs", torch.arange(1, num_rbf + 1) * math.pi / self.cutoff)

    def envelope(self, r: Tensor) -> Tensor:
        """``u(d) = 1 - (p+1)(p+2)/2 d^p + p(p+2) d^(p+1) - p(p+1)/2 d^(p+2)``, 0 past ``c``."""
        d = r / self.cutoff
        p = self.p
        u = (
            1
            - (p + 1) * (p + 2) / 2 * d**p
            + p * (p + 2) * d ** (p + 1)
            - p * (p + 1) / 2 * d ** (p + 2)
        )
        return torch.where(d < 1, u, torch.zeros_like(u))

    def forward(self, r: Tensor) -> Tensor:
        r = r.unsqueeze(-1)
        bessel = math.sqrt(2.0 / self.cutoff) * torch.sin(self.freqs * r) / r
        return bessel * self.envelope(r)


def mlp(sizes: list[int], last_act: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if k < len(sizes) - 2 or last_act:
            layers.append(nn.SiLU())
    return nn.Sequential(*layers)


def unconstrained_edge_features(vec: Tensor, rbf: Tensor) -> Tensor:
    """Edge input of the unconstrained MPNN: ``[r_ij, rbf, r_ij ⊗ rbf]``, shape
    (E, 3 + R + 3R) for ``vec`` (E, 3) and ``rbf`` (E, R)."""
    outer = (vec.unsqueeze(-1) * rbf.unsqueeze(1)).flatten(1)
    return torch.cat([vec, rbf, outer], dim=-1)


class UnconstrainedLayer(MessagePassing):
    """``m_ij = MLP([h_i, h_j, e_ij]) u(r_ij)`` with ``e_ij`` from
    :func:`unconstrained_edge_features`; ``h_i += MLP(sum_j m_ij / K)``."""

    def __init__(self, width: int, num_rbf: int) -> None:
        super().__init__(aggr="add")
        edge_dim = 3 + num_rbf + 3 * num_rbf
        self.message_mlp = mlp([2 * width + edge_dim, width, width], last_act=True)
        self.update_mlp = mlp([width, width, width])

    def forward(self, h: Tensor, edge_index: Tensor, edge_attr: Tensor, env: Tensor) -> Tensor:
        agg = self.propagate(edge_index, h=h, edge_attr=edge_attr, env=env) / NEIGHBOR_NORM
        return h + self.update_mlp(agg)

    def message(self, h_i: Tensor, h_j: Tensor, edge_attr: Tensor, env: Tensor) -> Tensor:
        return self.message_mlp(torch.cat([h_i, h_j, edge_attr], dim=-1)) * env.unsqueeze(-1)


class InvariantLayer(MessagePassing):
    """SchNet continuous filter: ``h_i += MLP(sum_j W(rbf(d_ij)) ⊙ Lin(h_j) / K)``."""

    def __init__(self, width: int, num_rbf: int) -> None:
        super().__init__(aggr="add")
        self.filter = mlp([num_rbf, width, width])
        self.lin = nn.Linear(width, width, bias=False)
        self.update_mlp = mlp([width, width, width])

    def forward(self, h: Tensor, edge_index: Tensor, rbf: Tensor) -> Tensor:
        agg = self.propagate(edge_index, x=self.lin(h), w=self.filter(rbf)) / NEIGHBOR_NORM
        return h + self.update_mlp(agg)

    def message(self, x_j: Tensor, w: Tensor) -> Tensor:
        return x_j * w


class TensorProductLayer(MessagePassing):
    """NequIP-style interaction: ``m_ij = TP(h_j, Y(r̂_ij); R(rbf(d_ij)))`` ("uvu" paths),
    ``h_i <- Gate(Lin(sum_j m_ij / K)) + SelfLin(h_i)``. Irreps in and out as given."""

    def __init__(self, irreps_in: Any, irreps_out: Any, lmax: int, width: int, num_rbf: int):
        super().__init__(aggr="add")
        from e3nn import o3
        from e3nn.nn import Gate

        self.irreps_in = o3.Irreps(irreps_in)
        self.irreps_out = o3.Irreps(irreps_out)
        irreps_sh = o3.Irreps.spherical_harmonics(lmax)
        mid: list[tuple[int, Any]] = []
        instructions = []
        for i, (mul, ir_in) in enumerate(self.irreps_in):
            for j, (_, ir_sh) in enumerate(irreps_sh):
                for ir_out in ir_in * ir_sh:
                    if ir_out.l <= lmax and ir_out.p == (-1) ** ir_out.l:
                        instructions.append((i, j, len(mid), "uvu", True))
                        mid.append((mul, ir_out))
        irreps_mid = o3.Irreps(mid)
        irreps_mid, perm, _ = irreps_mid.sort()
        instructions = [(i, j, perm[k], mode, train) for i, j, k, mode, train in instructions]
        self.tp = o3.TensorProduct(
            self.irreps_in,
            irreps_sh,
            irreps_mid,
            instructions,
            shared_weights=False,
            internal_weights=False,
        )
        self.radial = mlp([num_rbf, width, self.tp.weight_numel])
        scalars = o3.Irreps([(m, ir) for m, ir in self.irreps_out if ir.l == 0])
        gated = o3.Irreps([(m, ir) for m, ir in self.irreps_out if ir.l > 0])
        gates = o3.Irreps(f"{gated.num_irreps}x0e")
        self.gate = Gate(scalars, [nn.functional.silu], gates, [torch.sigmoid], gated)
        self.lin_out = o3.Linear(irreps_mid, self.gate.irreps_in)
        self.self_connection = o3.Linear(self.irreps_in, self.gate.irreps_out)

    def forward(self, h: Tensor, edge_index: Tensor, sh: Tensor, rbf: Tensor) -> Tensor:
        agg = self.propagate(edge_index, x=h, sh=sh, w=self.radial(rbf)) / NEIGHBOR_NORM
        return self.gate(self.lin_out(agg)) + self.self_connection(h)

    def message(self, x_j: Tensor, sh: Tensor, w: Tensor) -> Tensor:
        return self.tp(x_j, sh, w)


class ForceField(nn.Module):
    """One force field of the family (see the module docstring).

    Args:
        arch: one of ``mpnn``, ``invariant``, ``l1``, ``l2``, ``l3``, ``nequip``.
        width: channels per irrep (the width knob; N grows ~ width²).
        num_layers: message-passing layers (the depth knob).
        cutoff: neighbour cutoff in Å (must match the graphs' cutoff).
        num_rbf: radial basis functions.
        conservative: forces ``-dE/dpos`` (and stress) instead of the direct force head
            (always on for ``nequip``, which has no direct force head).
        l_max: rotation order of the ``nequip`` peer's features (the other archs ignore it:
            theirs is in the name).

    ``forward(batch)`` takes a PyG ``Batch``/``Data`` of graphs from
    :func:`atomistic_scaling.graph.atoms_to_graph` and returns ``{"energy": (B,),
    "forces": (N, 3)}`` plus ``"stress"`` (B, 3, 3), eV/Å³, when conservative and
    ``compute_stress=True``.
    """

    def __init__(
        self,
        arch: str = "l1",
        width: int = 16,
        num_layers: int = 2,
        cutoff: float = 4.5,
        num_rbf: int = 8,
        conservative: bool = False,
        l_max: int = 1,
    ) -> None:
        super().__init__()
        if arch not in ARCHITECTURES:
            raise ValueError(f"unknown arch {arch!r}; choose one of {ARCHITECTURES}")
        if width < 1 or num_layers < 1 or cutoff <= 0 or num_rbf < 1:
            raise ValueError("width, num_layers, num_rbf must be >= 1 and cutoff > 0")
        self.arch = arch
        self.width = width
        self.cutoff = float(cutoff)
        self.conservative = conservative or arch == "nequip"
        self.peer: nn.Module | None = None
        self.register_buffer("atomic_energies", torch.zeros(MAX_Z))
        #: Elements of the training data (set with :meth:`set_atomic_references`); the ASE
        #: calculator refuses structures with any other element.
        self.register_buffer("trained_elements", torch.zeros(MAX_Z, dtype=torch.bool))
        if arch == "nequip":
            from atomistic_scaling.peers import NequIPEnergy

            if l_max < 0:
                raise ValueError("l_max must be >= 0")
            self.peer = NequIPEnergy(width, num_layers, l_max, cutoff, num_rbf)
            return
        self.rbf = RadialBasis(num_rbf, cutoff)
        self.embedding = nn.Embedding(MAX_Z, width)
        self.energy_head = mlp([width, width, 1])
        if arch == "mpnn":
            self.layers = nn.ModuleList(
                UnconstrainedLayer(width, num_rbf) for _ in range(num_layers)
            )
            self.force_head: nn.Module = nn.Linear(width, 3)
        elif arch == "invariant":
            self.layers = nn.ModuleList(InvariantLayer(width, num_rbf) for _ in range(num_layers))
            self.force_head = mlp([2 * width + num_rbf, width, 1])
        else:
            from e3nn import o3

            lmax = int(arch[1])
            self.lmax = lmax
            self.sh = o3.SphericalHarmonics(
                o3.Irreps.spherical_harmonics(lmax), normalize=True, normalization="component"
            )
            hidden = o3.Irreps([(width, (ell, (-1) ** ell)) for ell in range(lmax + 1)])
            irreps = [o3.Irreps(f"{width}x0e")] + [hidden] * num_layers
            self.layers = nn.ModuleList(
                TensorProductLayer(irreps[k], irreps[k + 1], lmax, width, num_rbf)
                for k in range(num_layers)
            )
            self.force_head = o3.Linear(hidden, o3.Irreps("1x1o"))

    def set_atomic_references(self, energies: Tensor, elements: Iterable[int]) -> None:
        """Sets the per-element reference energies ``E0`` (MAX_Z,) and the training elements."""
        with torch.no_grad():
            self.atomic_energies.copy_(energies)
            self.trained_elements.zero_()
            self.trained_elements[list(elements)] = True

    def unseen_elements(self, numbers: Iterable[int]) -> list[int]:
        """Atomic numbers in ``numbers`` that were not in the training data, sorted."""
        seen = self.trained_elements.cpu()
        return sorted({int(z) for z in numbers if not 0 < int(z) < MAX_Z or not seen[int(z)]})

    def _node_outputs(self, z: Tensor, vec: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
        """Per-atom energies (N,) and direct forces (N, 3) from bond vectors ``vec`` (E, 3)."""
        r = vec.norm(dim=-1)
        rbf = self.rbf(r)
        h = self.embedding(z)
        n = z.shape[0]
        if self.arch == "mpnn":
            env = self.rbf.envelope(r)
            edge_attr = unconstrained_edge_features(vec, rbf)
            for layer in self.layers:
                h = layer(h, edge_index, edge_attr, env)
            return self.energy_head(h).squeeze(-1), self.force_head(h)
        if self.arch == "invariant":
            for layer in self.layers:
                h = layer(h, edge_index, rbf)
            src, dst = edge_index
            s = self.force_head(torch.cat([h[dst], h[src], rbf], dim=-1))
            s = s * self.rbf.envelope(r).unsqueeze(-1)
            forces = scatter(s * vec / r.unsqueeze(-1), dst, dim=0, dim_size=n)
            return self.energy_head(h).squeeze(-1), forces / NEIGHBOR_NORM
        sh = self.sh(vec)
        for layer in self.layers:
            h = layer(h, edge_index, sh, rbf)
        return self.energy_head(h[:, : self.width]).squeeze(-1), self.force_head(h)

    def forward(self, batch: Data | Batch, compute_stress: bool = False) -> dict[str, Tensor]:
        pos, cell = batch.pos, batch.cell
        atom_batch = getattr(batch, "batch", None)
        if atom_batch is None:
            atom_batch = torch.zeros(pos.shape[0], dtype=torch.long, device=pos.device)
        num_graphs = cell.shape[0]
        strain = None
        if self.conservative:
            pos = pos.detach().requires_grad_(True) if not pos.requires_grad else pos
            if compute_stress:
                strain = torch.zeros_like(cell).requires_grad_(True)
                sym = 0.5 * (strain + strain.transpose(1, 2))
                pos = pos + torch.einsum("nk,nkl->nl", pos, sym[atom_batch])
                cell = cell + torch.bmm(cell, sym)
        vec = edge_vectors(pos, cell, batch.edge_index, batch.shifts, atom_batch)
        if self.peer is not None:
            node_energy, direct = self.peer(batch.z, vec, batch.edge_index, atom_batch), None
        else:
            node_energy, direct = self._node_outputs(batch.z, vec, batch.edge_index)
        node_energy = node_energy + self.atomic_energies[batch.z]
        energy = scatter(node_energy, atom_batch, dim=0, dim_size=num_graphs)
        out = {"energy": energy}
        if not self.conservative:
            out["forces"] = direct
            return out
        inputs = [pos] if strain is None else [pos, strain]
        grads = torch.autograd.grad(
            energy.sum(), inputs, create_graph=self.training, allow_unused=True
        )
        out["forces"] = -grads[0]
        if strain is not None:
            volume = torch.linalg.det(batch.cell).abs().clamp_min(1e-12)
            out["stress"] = grads[1] / volume.view(-1, 1, 1)
        return out
