r"""Physics-based synthetic RF-MatID data: monostatic wide-band S11 of material slabs.

The generator mimics the upstream measurement (an Anritsu MS46131A 1-port VNA, 4-43.5 GHz,
2048 points, one horn looking at a material specimen at distance ``d`` tilted by ``theta``).
Convention: time dependence :math:`e^{+j\omega t}`, so lossy permittivities have a negative
imaginary part and a delay :math:`\tau` is :math:`e^{-j 2\pi f \tau}`.

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

3. Monostatic measurement (image theory for a plane reflector; Friis transmission between the
   horn and its mirror image; Balanis, "Antenna Theory", §2.17). The plate crosses boresight at
   distance ``d`` from the aperture and its normal is tilted by ``theta``. The specular return of
   an (effectively infinite) plane travels along the plate normal, i.e. at *normal incidence* on
   the material and ``theta`` off the horn boresight, over the image distance
   ``R = 2 (d + l_pc) cos(theta)`` (``l_pc``: phase centre behind the aperture)::

       Theta(f) = (Theta_max^-2 + (D / (65 deg * lambda))^2)^(-1/2)   (HPBW, deg)
       G0(f)    = 26000 / Theta(f)^2                                   (Stutzman & Thiele)
       G(f, th) = G0(f) exp(-4 ln2 th^2 / Theta(f)^2)                  (Gaussian main beam)
       T_c(f)   = (1 + dg) exp(-alpha_c sqrt(f_GHz)) exp(-j 2 pi f (tau_c + dL / c))   (feed cable)
       S_leak   = rho_p + T_c^2 [rho_t(f) e^{-j2 pi f tau_t} + rho_a(f) e^{-j2 pi f tau_a}]
       S_1      = T_c^2 e^{-j 2 pi f tau_h} G(f, th) lambda / (4 pi R) Gamma(f) e^{-j k0 R}
       S_2      = S_1 Gamma(f) (l_s(f) / R) e^{-j k0 R} exp(-2 ln2 (2 th)^2 / Theta^2)
       S11      = S_leak + S_1 + S_2 + n(f)

   ``S_leak`` is the horn's own return loss ("leakage": port connector, throat transition and
   aperture mismatch, fixed for the instrument), ``S_1`` the specular echo, ``S_2`` the
   horn-plate double bounce (antenna structural scattering length l_s = eta_s A_ap / lambda,
   the broadside scattering length of an aperture of area A_ap, scaled by eta_s for a mostly
   matched horn). Noise ``n`` is complex Gaussian: an additive floor whose level rises linearly in
   dB across the band, plus multiplicative trace noise. Per sample, distance, angle, the
   permittivity coefficients (a, c), every layer thickness (uniform over the class range) and the
   cable (phase dL, gain dg) are jittered.

4. Time domain (band-pass impulse response, as a VNA time-domain mode): with Kaiser weights
   w_k (beta = 6) on the uniform grid f_k = f_0 + k df and t_n = n / (N_fft df)::

       h(t_n) = Re[ sum_k w_k S11(f_k) e^{j 2 pi f_k t_n} ] / sum_k w_k,   n = 0..10239

   computed with one zero-padded inverse FFT (N_fft = 25600: on the MS46131A grid this samples
   0-20.7 ns every 2.02 ps, Nyquist 247 GHz, and covers the 2 m echo at about 15.2 ns). A unit
   reflector at delay tau gives h = 1 at t = tau.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from rf_matid.classes import SYNTHETIC_CLASSES
from rf_matid.constants import ANGLES_DEG, DISTANCES_MM, FREQ_GRID_HZ, TIME_POINTS

SPEED_OF_LIGHT = 299_792_458.0  # m/s
FREE_SPACE_IMPEDANCE = 376.730313412  # ohm, eta0 = sqrt(mu0 / eps0)

TIME_FFT_LENGTH = 25600
TIME_WINDOW_BETA = 6.0
_CHUNK = 64  # samples per vectorised block (keeps temporaries in cache)

Polarization = Literal["TE", "TM"]


# --------------------------------------------------------------------------- materials


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


# --------------------------------------------------------------------------- slab reflection


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


# --------------------------------------------------------------------------- instrument


@dataclass(frozen=True)
class MonostaticSetup:
    """Instrument constants of the monostatic model (module docstring eq. 3); SI units."""

    aperture_m: float = 0.025  # effective horn aperture D
    max_beamwidth_deg: float = 70.0  # Theta_max, low-frequency beamwidth limit
    phase_centre_m: float = 0.020  # l_pc, phase centre behind the aperture
    cable_delay_s: float = 0.75e-9  # tau_c, one way
    cable_loss_np_sqrt_ghz: float = 0.012  # alpha_c, one way
    horn_delay_s: float = 0.25e-9  # tau_h, round trip cable end -> phase centre
    port_reflection: complex = 0.02 * complex(math.cos(math.pi / 3), math.sin(math.pi / 3))
    throat_reflection: float = 0.12  # rho_t at 4 GHz, falls as f^-0.7
    throat_delay_s: float = 0.10e-9  # tau_t, round trip
    aperture_reflection: float = 0.08  # rho_a at 4 GHz, falls as f^-1
    structural_scattering: float = 0.3  # eta_s
    noise_floor_db: tuple[float, float] = (-75.0, -65.0)  # complex rms at 4 GHz, 43.5 GHz
    trace_noise: float = 3.5e-4  # relative complex rms
    distance_jitter_m: float = 1.0e-3
    angle_jitter_deg: float = 0.25
    eps_real_jitter: float = 0.02  # relative rms of a
    conductivity_jitter: float = 0.10  # log-normal sigma of c
    cable_phase_jitter_m: float = 0.03e-3
    cable_gain_jitter: float = 0.002

    @property
    def aperture_delay_s(self) -> float:
        """tau_a: the aperture lies l_pc in front of the phase centre."""
        return self.horn_delay_s + 2 * self.phase_centre_m / SPEED_OF_LIGHT


DEFAULT_SETUP = MonostaticSetup()


def horn_beamwidth_deg(freq_hz: np.ndarray, setup: MonostaticSetup = DEFAULT_SETUP) -> np.ndarray:
    """Half-power beamwidth Theta(f) in degrees [F] (module docstring eq. 3)."""
    wavelength = SPEED_OF_LIGHT / np.asarray(freq_hz, dtype=np.float64)
    aperture_term = setup.aperture_m / (65.0 * wavelength)
    return 1.0 / np.sqrt(setup.max_beamwidth_deg**-2 + aperture_term**2)


def beam_pattern(
    freq_hz: np.ndarray, angle_deg: np.ndarray | float, setup: MonostaticSetup = DEFAULT_SETUP
) -> np.ndarray:
    """Normalised power pattern exp(-4 ln2 theta^2 / Theta(f)^2) of the Gaussian main beam.

    angle [...] (deg off boresight) and freq_hz [F] -> [..., F]; 1 on boresight, 1/2 at
    theta = Theta(f) / 2.
    """
    beamwidth = horn_beamwidth_deg(freq_hz, setup)
    angle = np.asarray(angle_deg, dtype=np.float64)[..., None]
    return np.exp(-4 * np.log(2) * angle**2 / beamwidth**2)


def horn_gain(
    freq_hz: np.ndarray, angle_deg: np.ndarray | float, setup: MonostaticSetup = DEFAULT_SETUP
) -> np.ndarray:
    """Power gain G(f, theta) = 26000 / Theta(f)^2 * beam_pattern; angle [...] -> [..., F]."""
    beamwidth = horn_beamwidth_deg(freq_hz, setup)
    return 26000.0 / beamwidth**2 * beam_pattern(freq_hz, angle_deg, setup)


def _leakage_inner(freq: np.ndarray, setup: MonostaticSetup) -> np.ndarray:
    """Throat and aperture reflections [F] seen at the cable end."""
    f_rel = freq / 4e9
    throat = setup.throat_reflection * f_rel**-0.7
    aperture = setup.aperture_reflection / f_rel
    return throat * np.exp(-2j * np.pi * freq * setup.throat_delay_s) + aperture * np.exp(
        -2j * np.pi * freq * setup.aperture_delay_s
    )


def cable_round_trip(
    freq_hz: np.ndarray,
    setup: MonostaticSetup = DEFAULT_SETUP,
    phase_m: np.ndarray | None = None,
    gain: np.ndarray | None = None,
) -> np.ndarray:
    """T_c(f)^2 [B, F] with per-sample drift ``phase_m``, ``gain`` [B] (nominal [1, F] if None)."""
    freq = np.asarray(freq_hz, dtype=np.float64)
    phase_m = np.zeros(1) if phase_m is None else np.asarray(phase_m, dtype=np.float64)
    gain = np.zeros(1) if gain is None else np.asarray(gain, dtype=np.float64)
    delay = setup.cable_delay_s + phase_m[:, None] / SPEED_OF_LIGHT
    loss = np.exp(-2 * setup.cable_loss_np_sqrt_ghz * np.sqrt(freq / 1e9))
    return ((1 + gain[:, None]) ** 2 * loss) * np.exp(-4j * np.pi * freq * delay)


def horn_leakage(
    freq_hz: np.ndarray,
    setup: MonostaticSetup = DEFAULT_SETUP,
    cable2: np.ndarray | None = None,
) -> np.ndarray:
    """Horn return loss S_leak(f) [..., F]; ``cable2`` is T_c^2 [..., F] (nominal if None)."""
    freq = np.asarray(freq_hz, dtype=np.float64)
    if cable2 is None:
        cable2 = cable_round_trip(freq, setup)[0]
    return setup.port_reflection + cable2 * _leakage_inner(freq, setup)


# --------------------------------------------------------------------------- simulation


@dataclass
class _Draws:
    """Per-sample random draws, stacked: B samples, MAX_LAYERS layers, F frequencies."""

    n_layers: np.ndarray  # [B] layers actually used by the class
    distance_m: np.ndarray
    angle_deg: np.ndarray
    coeffs: np.ndarray  # [B, L, 4] (a, b, c, d), padded with air
    thickness_m: np.ndarray  # [B, L], padded with 0
    cable_phase_m: np.ndarray
    cable_gain: np.ndarray
    noise: np.ndarray  # [B, 4, F] standard normal: floor re/im, trace re/im


def _validate_class(name: str) -> MaterialClass:
    try:
        return MATERIAL_CLASSES[name]
    except KeyError:
        raise ValueError(
            f"unknown synthetic class {name!r}; expected one of {', '.join(MATERIAL_CLASSES)}"
        ) from None


def _draw(
    class_names: Sequence[str],
    distances_mm: np.ndarray,
    angles_deg: np.ndarray,
    rngs: Sequence[np.random.Generator],
    n_freq: int,
    setup: MonostaticSetup,
) -> _Draws:
    """Per-sample draws in a fixed order, so a sample depends only on its own generator state."""
    n = len(class_names)
    n_layers = np.empty(n, dtype=np.int64)
    coeffs = np.zeros((n, MAX_LAYERS, 4))
    coeffs[:, :, 0] = 1.0
    thickness = np.zeros((n, MAX_LAYERS))
    distance = np.empty(n)
    angle = np.empty(n)
    drift = np.empty((n, 2))
    noise = np.empty((n, 4, n_freq))
    drift_scale = np.array([setup.cable_phase_jitter_m, setup.cable_gain_jitter])
    for i, (name, rng) in enumerate(zip(class_names, rngs, strict=True)):
        spec = _validate_class(name)
        n_layers[i] = len(spec.layers)
        distance[i] = distances_mm[i] * 1e-3 + setup.distance_jitter_m * rng.standard_normal()
        angle[i] = angles_deg[i] + setup.angle_jitter_deg * rng.standard_normal()
        for j, layer in enumerate(spec.layers):
            material = MATERIALS[layer.material]
            thickness[i, j] = rng.uniform(*layer.thickness_mm) * 1e-3
            a_scale, c_scale = rng.standard_normal(2)
            if layer.material != "air":
                coeffs[i, j] = (
                    material.a * (1 + setup.eps_real_jitter * a_scale),
                    material.b,
                    material.c * math.exp(setup.conductivity_jitter * c_scale),
                    material.d,
                )
        drift[i] = rng.standard_normal(2) * drift_scale
        noise[i] = rng.standard_normal((4, n_freq))
    return _Draws(n_layers, distance, angle, coeffs, thickness, drift[:, 0], drift[:, 1], noise)


def _slab_reflection(draws: _Draws, freq: np.ndarray) -> np.ndarray:
    """Gamma [B, F] at normal incidence, grouping samples by their number of layers."""
    gamma = np.empty((draws.n_layers.size, freq.size), dtype=np.complex128)
    for n_layers in np.unique(draws.n_layers):
        rows = np.flatnonzero(draws.n_layers == n_layers)
        coeffs = draws.coeffs[rows, :n_layers]
        eps = itu_permittivity(coeffs[..., 0], coeffs[..., 1], coeffs[..., 2], coeffs[..., 3], freq)
        gamma[rows] = multilayer_reflection(eps, draws.thickness_m[rows, :n_layers], freq)
    return gamma


def _simulate(draws: _Draws, freq: np.ndarray, setup: MonostaticSetup) -> np.ndarray:
    """Vectorised S11 [B, F] (complex128) for stacked draws (module docstring eq. 1-3)."""
    gamma = _slab_reflection(draws, freq)
    wavelength = SPEED_OF_LIGHT / freq
    k0 = 2 * np.pi / wavelength
    r = (2 * (draws.distance_m + setup.phase_centre_m) * np.cos(np.radians(draws.angle_deg)))[
        :, None
    ]
    cable2 = cable_round_trip(freq, setup, draws.cable_phase_m, draws.cable_gain)
    propagation = np.exp(-1j * (k0 * r))
    gain = horn_gain(freq, draws.angle_deg, setup)
    horn_phase = np.exp(-2j * np.pi * freq * setup.horn_delay_s)
    echo = cable2 * (horn_phase * (gain * (wavelength / (4 * np.pi)) / r)) * gamma * propagation
    scatter_length = setup.structural_scattering * setup.aperture_m**2 / wavelength
    # double bounce (S_2): field pattern at 2 theta, exp(-2 ln2 (2 theta)^2 / Theta^2)
    scatter = scatter_length / r * np.sqrt(beam_pattern(freq, 2 * draws.angle_deg, setup))
    clean = horn_leakage(freq, setup, cable2) + echo * (1 + gamma * propagation * scatter)
    floor_db = np.interp(freq, (4e9, 43.5e9), setup.noise_floor_db)
    floor = 10 ** (floor_db / 20) / np.sqrt(2)
    noise = draws.noise
    trace = (setup.trace_noise / np.sqrt(2)) * (noise[:, 2] + 1j * noise[:, 3])
    return clean * (1 + trace) + floor * (noise[:, 0] + 1j * noise[:, 1])


def _check_grid(freq_hz: np.ndarray) -> np.ndarray:
    freq = np.asarray(freq_hz, dtype=np.float64)
    if freq.ndim != 1 or freq.size < 2 or np.any(freq <= 0) or np.any(np.diff(freq) <= 0):
        raise ValueError("freq_hz must be a 1-D increasing array of positive frequencies")
    return freq


def simulate_batch(
    class_names: Sequence[str],
    distances_mm: Sequence[float] | np.ndarray,
    angles_deg: Sequence[float] | np.ndarray,
    rng: np.random.Generator | Sequence[np.random.Generator],
    freq_hz: np.ndarray = FREQ_GRID_HZ,
    setup: MonostaticSetup = DEFAULT_SETUP,
) -> np.ndarray:
    """Monostatic S11 for B positions (module docstring eq. 3) -> complex64 [B, F].

    ``rng`` is one generator (samples drawn in order) or one generator per sample.
    """
    freq = _check_grid(freq_hz)
    names = list(class_names)
    distances = np.asarray(distances_mm, dtype=np.float64)
    angles = np.asarray(angles_deg, dtype=np.float64)
    if distances.shape != (len(names),) or angles.shape != (len(names),):
        raise ValueError("class_names, distances_mm and angles_deg must have the same length")
    if np.any(distances <= 0) or not np.all(np.isfinite(distances)):
        raise ValueError("distances_mm must be positive and finite")
    if np.any(np.abs(angles) >= 90) or not np.all(np.isfinite(angles)):
        raise ValueError("angles_deg must lie in (-90, 90)")
    rngs = [rng] * len(names) if isinstance(rng, np.random.Generator) else list(rng)
    if len(rngs) != len(names):
        raise ValueError(f"got {len(rngs)} generators for {len(names)} samples")
    out = np.empty((len(names), freq.size), dtype=np.complex64)
    for start in range(0, len(names), _CHUNK):
        rows = slice(start, start + _CHUNK)
        draws = _draw(names[rows], distances[rows], angles[rows], rngs[rows], freq.size, setup)
        out[rows] = _simulate(draws, freq, setup)
    return out


def simulate_s11(
    class_name: str,
    distance_mm: float,
    angle_deg: float,
    rng: np.random.Generator,
    freq_hz: np.ndarray = FREQ_GRID_HZ,
    setup: MonostaticSetup = DEFAULT_SETUP,
) -> np.ndarray:
    """One monostatic S11 measurement (module docstring eq. 3) -> complex64 [F]."""
    return simulate_batch([class_name], [distance_mm], [angle_deg], rng, freq_hz, setup)[0]


def echo_to_interference_db(
    distances_mm: Sequence[float],
    classes: Sequence[str] | None = None,
    freq_hz: np.ndarray = FREQ_GRID_HZ,
    setup: MonostaticSetup = DEFAULT_SETUP,
) -> np.ndarray:
    """Material-echo to interference ratio (dB) of the generator at each distance [D].

    For every class at its mid-range thickness and nominal permittivity, on boresight, without
    jitter or noise draws: signal = S11_clean - S_leak (the specular echo and the double bounce,
    module docstring eq. 3), interference = S_leak plus the noise floor's power. Returns
    10 log10(mean |signal|^2 / mean(|S_leak|^2 + floor^2)), means over classes and the band. It
    measures what makes a distance easy or hard *in this generator*: the echo falls as 1/R
    against a fixed leakage and noise floor, so the ratio falls with distance, and nothing in the
    model (no near-field or multipath term) makes short range harder.
    """
    freq = _check_grid(freq_hz)
    names = list(SYNTHETIC_CLASSES) if classes is None else list(classes)
    specs = [_validate_class(name) for name in names]
    n = len(specs)
    coeffs = np.zeros((n, MAX_LAYERS, 4))
    coeffs[:, :, 0] = 1.0
    thickness = np.zeros((n, MAX_LAYERS))
    for i, spec in enumerate(specs):
        for j, layer in enumerate(spec.layers):
            material = MATERIALS[layer.material]
            coeffs[i, j] = (material.a, material.b, material.c, material.d)
            thickness[i, j] = 0.5e-3 * sum(layer.thickness_mm)
    floor = 10 ** (np.interp(freq, (4e9, 43.5e9), setup.noise_floor_db) / 20)
    leak = horn_leakage(freq, setup)
    interference = float(np.mean(np.abs(leak) ** 2 + floor**2))
    ratios = []
    for distance in distances_mm:
        draws = _Draws(
            n_layers=np.array([len(spec.layers) for spec in specs]),
            distance_m=np.full(n, float(distance) * 1e-3),
            angle_deg=np.zeros(n),
            coeffs=coeffs,
            thickness_m=thickness,
            cable_phase_m=np.zeros(n),
            cable_gain=np.zeros(n),
            noise=np.zeros((n, 4, freq.size)),
        )
        signal = _simulate(draws, freq, setup) - leak
        ratios.append(10 * np.log10(float(np.mean(np.abs(signal) ** 2)) / interference))
    return np.array(ratios)


# --------------------------------------------------------------------------- time domain


def frequency_to_time(
    freq_hz: np.ndarray,
    s11: np.ndarray,
    n_time: int = TIME_POINTS,
    n_fft: int = TIME_FFT_LENGTH,
) -> tuple[np.ndarray, np.ndarray]:
    """Band-pass impulse response (module docstring eq. 4).

    freq_hz: uniform [F]; s11: complex [..., F]. Returns time_ps float64 [n_time] and amplitude
    float32 [..., n_time] on t_n = n / (n_fft df).
    """
    freq = _check_grid(freq_hz)
    step = np.diff(freq)
    if not np.allclose(step, step[0], rtol=1e-6, atol=0):
        raise ValueError("freq_hz must be uniformly spaced for the inverse FFT")
    values = np.asarray(s11)
    if values.shape[-1] != freq.size:
        raise ValueError(
            f"s11 has {values.shape[-1]} points on its last axis, expected {freq.size}"
        )
    if not (0 < n_time <= n_fft and freq.size <= n_fft):
        raise ValueError("need 0 < n_time <= n_fft and len(freq_hz) <= n_fft")
    df = (freq[-1] - freq[0]) / (freq.size - 1)
    window = np.kaiser(freq.size, TIME_WINDOW_BETA)
    time_s = np.arange(n_time) / (n_fft * df)
    carrier = np.exp(2j * np.pi * freq[0] * time_s)
    batch = values.reshape(-1, freq.size)
    amplitude = np.empty((batch.shape[0], n_time), dtype=np.float32)
    chunk = 64
    for start in range(0, batch.shape[0], chunk):
        weighted = batch[start : start + chunk].astype(np.complex128) * window
        response = np.fft.ifft(weighted, n=n_fft, axis=-1)[:, :n_time] * n_fft
        amplitude[start : start + chunk] = (response * carrier).real / window.sum()
    return time_s * 1e12, amplitude.reshape((*values.shape[:-1], n_time))


# --------------------------------------------------------------------------- dataset


def sample_rng(
    seed: int, class_name: str, distance_mm: int, angle_deg: int, index: int
) -> np.random.Generator:
    """Generator of one sample, independent of which other samples are generated."""
    key = (zlib.crc32(class_name.encode()), int(distance_mm), int(angle_deg), int(index))
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=key))


def _int_list(name: str, values: Sequence[int] | None, default: Sequence[int]) -> list[int]:
    items = list(default if values is None else values)
    if not items:
        raise ValueError(f"{name} must not be empty")
    for value in items:
        if isinstance(value, bool) or int(value) != value or value < 0:
            raise ValueError(f"{name} must hold non-negative integers, got {value!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"{name} has duplicates: {items}")
    return [int(v) for v in items]


def generate_dataset(
    out_dir: str | Path,
    classes: Sequence[str] | None = None,
    distances_mm: Sequence[int] | None = None,
    angles_deg: Sequence[int] | None = None,
    samples_per_position: int = 1,
    seed: int = 0,
    write_time: bool = True,
    setup: MonostaticSetup = DEFAULT_SETUP,
    chunk_size: int = 256,
    freq_header: str | None = None,
) -> Path:
    """Write a synthetic dataset in the upstream format via ``rf_matid.io.write_sample``.

    Defaults: all 16 classes, distances 200-2000 mm step 50, angles 0-10 deg. Sample ``i`` at
    (class, distance, angle) depends only on (seed, class, distance, angle, i) (``sample_rng``).
    ``freq_header``: the frequency CSVs' header, ``rf_matid.io.FREQ_HEADER`` (default,
    ``freq_hz,real,imag``) or ``UPSTREAM_FREQ_HEADER`` (``freq.GHZ,real,imag`` over the same Hz
    values, as the released files). Refuses an ``out_dir`` that already holds samples, so runs
    never mix. Returns ``out_dir``.
    """
    from rf_matid.constants import FOLDER_PREFIX
    from rf_matid.io import (
        FREQ_DOMAIN_DIRS,
        FREQ_HEADER,
        TIME_DOMAIN_DIR,
        Position,
        write_sample,
    )

    freq_header = FREQ_HEADER if freq_header is None else freq_header

    names = list(SYNTHETIC_CLASSES) if classes is None else list(classes)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"classes must be non-empty without duplicates, got {names}")
    for name in names:
        _validate_class(name)
    distances = _int_list("distances_mm", distances_mm, DISTANCES_MM)
    angles = _int_list("angles_deg", angles_deg, ANGLES_DEG)
    if any(d == 0 for d in distances) or any(a >= 90 for a in angles):
        raise ValueError("distances_mm must be > 0 and angles_deg < 90")
    if isinstance(samples_per_position, bool) or int(samples_per_position) < 1:
        raise ValueError(f"samples_per_position must be >= 1, got {samples_per_position!r}")
    root = Path(out_dir)
    for sub in (*FREQ_DOMAIN_DIRS, TIME_DOMAIN_DIR):
        if (root / sub).is_dir() and any((root / sub).iterdir()):
            raise FileExistsError(f"{root / sub} already holds samples; use an empty out_dir")
    if root.is_dir() and any(p.name.startswith(FOLDER_PREFIX) for p in root.iterdir()):
        raise FileExistsError(f"{root} already holds position folders; use an empty out_dir")
    root.mkdir(parents=True, exist_ok=True)

    jobs = [
        (Position(name, distance, angle), index)
        for name in sorted(names)
        for distance in distances
        for angle in angles
        for index in range(int(samples_per_position))
    ]
    freq = FREQ_GRID_HZ
    for start in range(0, len(jobs), chunk_size):
        chunk = jobs[start : start + chunk_size]
        rngs = [
            sample_rng(seed, p.class_name, p.distance_mm, p.angle_deg, index) for p, index in chunk
        ]
        s11 = simulate_batch(
            [p.class_name for p, _ in chunk],
            [p.distance_mm for p, _ in chunk],
            [p.angle_deg for p, _ in chunk],
            rngs,
            freq,
            setup,
        )
        if write_time:
            time_ps, amplitude = frequency_to_time(freq, s11)
        for row, (position, index) in enumerate(chunk):
            if write_time:
                write_sample(
                    root, position, index, freq, s11[row], time_ps, amplitude[row], freq_header
                )
            else:
                write_sample(root, position, index, freq, s11[row], freq_header=freq_header)
    return root
