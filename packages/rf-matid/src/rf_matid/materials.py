r"""Materials of the synthetic RF-MatID classes and the plane-wave reflection of their slabs.

The dielectric half of the generator (:mod:`rf_matid.synth` adds the horn, the cable and the
noise of the monostatic measurement). Convention: time dependence :math:`e^{+j\omega t}`, so
lossy permittivities have a negative imaginary part.

1. Permittivity (ITU-R P.2040, "Effects of building materials and structures on radiowave
   propagation above about 100 MHz", Table 3 "Material properties"), f in GHz::

       eta'(f)  = a f^b                      (relative permittivity, real part)
       sigma(f) = c f^d          [S/m]       (conductivity)
       eta''(f) = 17.98 sigma(f) / f
       eps_r(f) = eta' - j eta'' = a f^b - j 17.98 c f^d / f

   P.2040 gives (a, b, c, d) for concrete, brick, wood, glass, marble and plywood (used
   verbatim). Materials that P.2040 does not list (polymers, granite, ceramic tile, aerated
   concrete, PVB, oak) use representative constant loss-tangent values written in the same form:
   b = 0, d = 1, c = a tan(delta) / 17.98, so eta''/eta' = tan(delta) at every frequency.

2. Plane-wave reflection of a planar multilayer in free space (transmission-line / Airy
   recursion; Orfanidis, "Electromagnetic Waves and Antennas", ch. 6-8; Born & Wolf §1.6).
   Media 0 (air), 1..L (layers of thickness t_i), L+1 (air). With sin(theta_0) the incidence
   angle in air and Snell's law in every layer::

       k_z,i = k0 sqrt(eps_i - sin^2 theta_0)                    (principal root, Im <= 0)
       Z_i   = eta0 k0 / k_z,i  (TE)      Z_i = eta0 k_z,i / (k0 eps_i)  (TM)
       rho_i = (Z_i - Z_{i-1}) / (Z_i + Z_{i-1})                 (interface i-1 | i)
       Gamma_{L+1} = rho_{L+1};   Gamma_i = (rho_i + Gamma_{i+1} z_i) / (1 + rho_i Gamma_{i+1} z_i),
       z_i = exp(-2j k_z,i t_i),  Gamma_slab = Gamma_1.

   For one layer at normal incidence this is Gamma = r (1 - e^{-2j beta t}) / (1 - r^2 e^{-2j beta t})
   with r = (1 - n) / (1 + n), beta = k0 n, n = sqrt(eps). ``multilayer_reflection_skrf`` builds
   the same structure as a scikit-rf ``DefinedGammaZ0`` line cascade terminated in a free-space
   match (reference implementation, tested against the recursion and the closed form).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rf_matid.classes import SYNTHETIC_CLASSES
from rf_matid.constants import FREE_SPACE_IMPEDANCE, SPEED_OF_LIGHT

Polarization = Literal["TE", "TM"]


@dataclass(frozen=True)
class ITUMaterial:
    """ITU-R P.2040 permittivity coefficients: eps = a f^b - j 17.98 c f^d / f (f in GHz)."""

    a: float
    b: float
    c: float
    d: float
    source: str

    def permittivity(self, freq_hz: np.ndarray) -> np.ndarray:
        """Complex relative permittivity [F] on ``freq_hz`` [F]."""
        return itu_permittivity(self.a, self.b, self.c, self.d, freq_hz)


def _loss_tangent_material(eps_real: float, tan_delta: float, source: str) -> ITUMaterial:
    return ITUMaterial(eps_real, 0.0, eps_real * tan_delta / 17.98, 1.0, source)


MATERIALS: dict[str, ITUMaterial] = {
    "air": ITUMaterial(1.0, 0.0, 0.0, 0.0, "vacuum"),
    "brick": ITUMaterial(3.91, 0.0, 0.0238, 0.16, "ITU-R P.2040 Table 3 (brick, 1-40 GHz)"),
    "concrete": ITUMaterial(5.24, 0.0, 0.0462, 0.7822, "ITU-R P.2040 Table 3 (concrete)"),
    "glass": ITUMaterial(6.31, 0.0, 0.0036, 1.3394, "ITU-R P.2040 Table 3 (glass)"),
    "marble": ITUMaterial(7.074, 0.0, 0.0055, 0.9262, "ITU-R P.2040 Table 3 (marble, 1-60 GHz)"),
    "plywood": ITUMaterial(2.71, 0.0, 0.33, 0.0, "ITU-R P.2040 Table 3 (plywood, 1-40 GHz)"),
    "pine": ITUMaterial(1.99, 0.0, 0.0047, 1.0718, "ITU-R P.2040 Table 3 (wood)"),
    "oak": ITUMaterial(
        2.45, 0.0, 0.0067, 1.0718, "P.2040 wood law, denser hardwood (representative)"
    ),
    "aerated_concrete": _loss_tangent_material(2.25, 0.03, "representative, tan(delta)=0.03"),
    "granite": _loss_tangent_material(5.6, 0.02, "representative, tan(delta)=0.02"),
    "ceramic": _loss_tangent_material(5.0, 0.035, "representative, tan(delta)=0.035"),
    "pmma": _loss_tangent_material(2.60, 0.008, "representative, tan(delta)=0.008"),
    "pvc": _loss_tangent_material(2.85, 0.012, "representative, tan(delta)=0.012"),
    "polycarbonate": _loss_tangent_material(2.75, 0.006, "representative, tan(delta)=0.006"),
    "pvb": _loss_tangent_material(2.9, 0.06, "representative, tan(delta)=0.06"),
}


@dataclass(frozen=True)
class LayerSpec:
    """One layer of a class: material key in ``MATERIALS`` and thickness range in mm."""

    material: str
    thickness_mm: tuple[float, float]


@dataclass(frozen=True)
class MaterialClass:
    """A synthetic class: its layers from the illuminated face to the back face."""

    name: str
    layers: tuple[LayerSpec, ...]


def _cls(name: str, *layers: tuple[str, float, float]) -> MaterialClass:
    return MaterialClass(name, tuple(LayerSpec(m, (lo, hi)) for m, lo, hi in layers))


MATERIAL_CLASSES: dict[str, MaterialClass] = {
    c.name: c
    for c in (
        _cls("brick01", ("brick", 85.0, 105.0)),
        _cls("brick02", ("brick", 10.0, 16.0), ("air", 18.0, 30.0), ("brick", 10.0, 16.0)),
        _cls("brick03", ("aerated_concrete", 70.0, 100.0)),
        _cls("glass01", ("glass", 3.5, 6.0)),
        _cls("glass02", ("glass", 5.5, 10.0)),
        _cls("glass03", ("glass", 2.8, 4.2), ("pvb", 0.38, 1.52), ("glass", 2.8, 4.2)),
        _cls("stone01", ("marble", 18.0, 30.0)),
        _cls("stone02", ("granite", 18.0, 30.0)),
        _cls("stone03", ("concrete", 40.0, 80.0)),
        _cls("stone04", ("ceramic", 7.0, 11.0)),
        _cls("syntheticMaterial01", ("pmma", 7.0, 12.0)),
        _cls("syntheticMaterial02", ("pvc", 2.5, 5.0)),
        _cls("syntheticMaterial03", ("polycarbonate", 4.5, 8.0)),
        _cls("wood01", ("pine", 15.0, 25.0)),
        _cls("wood02", ("oak", 15.0, 25.0)),
        _cls("wood03", ("plywood", 9.0, 18.0)),
    )
}
assert tuple(sorted(MATERIAL_CLASSES)) == tuple(SYNTHETIC_CLASSES), "class table out of sync"
MAX_LAYERS = max(len(c.layers) for c in MATERIAL_CLASSES.values())


def material_class(name: str) -> MaterialClass:
    """``MATERIAL_CLASSES[name]``; ValueError naming the known classes for another name."""
    try:
        return MATERIAL_CLASSES[name]
    except KeyError:
        raise ValueError(
            f"unknown synthetic class {name!r}; expected one of {', '.join(MATERIAL_CLASSES)}"
        ) from None


def itu_permittivity(
    a: np.ndarray | float,
    b: np.ndarray | float,
    c: np.ndarray | float,
    d: np.ndarray | float,
    freq_hz: np.ndarray,
) -> np.ndarray:
    """ITU-R P.2040 complex permittivity a f^b - j 17.98 c f^d / f (f in GHz).

    Coefficients broadcast against each other with a trailing frequency axis: shapes [...] and
    ``freq_hz`` [F] give [..., F] (complex128).
    """
    f_ghz = np.asarray(freq_hz, dtype=np.float64) / 1e9
    if np.any(f_ghz <= 0):
        raise ValueError("freq_hz must be positive")
    a, b, c, d = (np.asarray(v, dtype=np.float64)[..., None] for v in (a, b, c, d))
    log_f = np.log(f_ghz)
    return a * np.exp(b * log_f) - 1j * 17.98 * c * np.exp(d * log_f) / f_ghz


def _layer_wavenumbers(
    eps: np.ndarray, k0: np.ndarray, sin2: float, polarization: Polarization
) -> tuple[np.ndarray, np.ndarray]:
    """k_z and normalised wave impedance Z / eta0 for permittivities eps [..., F]."""
    kz_over_k0 = np.sqrt(eps - sin2)
    if polarization == "TE":
        z_norm = 1.0 / kz_over_k0
    elif polarization == "TM":
        z_norm = kz_over_k0 / eps
    else:
        raise ValueError(f"polarization must be 'TE' or 'TM', got {polarization!r}")
    return kz_over_k0 * k0, z_norm


def multilayer_reflection(
    eps: np.ndarray,
    thickness_m: np.ndarray,
    freq_hz: np.ndarray,
    incidence_deg: float = 0.0,
    polarization: Polarization = "TE",
) -> np.ndarray:
    """Plane-wave reflection Gamma of a multilayer in free space (module docstring eq. 2).

    eps: complex [..., L, F] per-layer permittivity (front layer first); thickness_m: [..., L];
    freq_hz: [F]. Returns complex128 [..., F]. Zero-thickness layers are transparent.
    """
    eps = np.asarray(eps, dtype=np.complex128)
    thickness = np.asarray(thickness_m, dtype=np.float64)
    freq = np.asarray(freq_hz, dtype=np.float64)
    if eps.ndim < 2 or eps.shape[-1] != freq.shape[-1] or thickness.shape != eps.shape[:-1]:
        raise ValueError(
            f"eps must be [..., L, F] and thickness_m [..., L]; got eps {eps.shape}, "
            f"thickness_m {thickness.shape}, freq_hz {freq.shape}"
        )
    if np.any(thickness < 0):
        raise ValueError("layer thicknesses must be non-negative")
    k0 = 2 * np.pi * freq / SPEED_OF_LIGHT
    sin2 = math.sin(math.radians(incidence_deg)) ** 2
    kz, z_layer = _layer_wavenumbers(eps, k0, sin2, polarization)
    _, z_air = _layer_wavenumbers(np.ones(1, dtype=np.complex128), k0, sin2, polarization)
    n_layers = eps.shape[-2]
    gamma = (z_air - z_layer[..., -1, :]) / (z_air + z_layer[..., -1, :])
    for i in range(n_layers - 1, -1, -1):
        z_front = z_air if i == 0 else z_layer[..., i - 1, :]
        rho = (z_layer[..., i, :] - z_front) / (z_layer[..., i, :] + z_front)
        delay = np.exp(-2j * kz[..., i, :] * thickness[..., i, None])
        gamma_delayed = gamma * delay
        gamma = (rho + gamma_delayed) / (1 + rho * gamma_delayed)
    return gamma


def multilayer_reflection_skrf(
    eps: np.ndarray,
    thickness_m: np.ndarray,
    freq_hz: np.ndarray,
    incidence_deg: float = 0.0,
    polarization: Polarization = "TE",
) -> np.ndarray:
    """Gamma of one multilayer via a scikit-rf ``DefinedGammaZ0`` line cascade (reference).

    eps: complex [L, F]; thickness_m: [L]; returns complex128 [F]. Every line is referenced to
    the free-space wave impedance and the cascade is terminated in a free-space match.
    """
    import skrf
    from skrf.media import DefinedGammaZ0

    eps = np.asarray(eps, dtype=np.complex128)
    thickness = np.asarray(thickness_m, dtype=np.float64)
    freq = np.asarray(freq_hz, dtype=np.float64)
    if eps.ndim != 2 or thickness.shape != eps.shape[:1] or eps.shape[1] != freq.shape[0]:
        raise ValueError("eps must be [L, F] and thickness_m [L]")
    frequency = skrf.Frequency.from_f(freq, unit="Hz")
    k0 = 2 * np.pi * freq / SPEED_OF_LIGHT
    sin2 = math.sin(math.radians(incidence_deg)) ** 2
    kz, z_layer = _layer_wavenumbers(eps, k0, sin2, polarization)
    air_kz, z_air = _layer_wavenumbers(np.ones((1, freq.size), complex), k0, sin2, polarization)
    z_port = FREE_SPACE_IMPEDANCE * z_air[0]
    air = DefinedGammaZ0(frequency, z0_port=z_port, z0=z_port, gamma=1j * air_kz[0])
    network = None
    for i in range(eps.shape[0]):
        medium = DefinedGammaZ0(
            frequency, z0_port=z_port, z0=FREE_SPACE_IMPEDANCE * z_layer[i], gamma=1j * kz[i]
        )
        line = medium.line(float(thickness[i]), unit="m")
        network = line if network is None else network**line
    assert network is not None
    return (network ** air.match()).s[:, 0, 0]
