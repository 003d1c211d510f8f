r"""Physics-based synthetic RF-MatID data: monostatic wide-band S11 of material slabs.

The generator mimics the upstream measurement (an Anritsu MS46131A 1-port VNA, 4-43.5 GHz,
2048 points, one horn looking at a material specimen at distance ``d`` tilted by ``theta``).
Convention: time dependence :math:`e^{+j\omega t}`, so lossy permittivities have a negative
imaginary part and a delay :math:`\tau` is :math:`e^{-j 2\pi f \tau}`.

Steps 1 (ITU-R P.2040 permittivity) and 2 (multilayer slab reflection Gamma) live in
:mod:`rf_matid.materials`; this module adds the instrument (3) and the time domain (4).
:mod:`rf_matid.synth_dataset` writes the spectra as a dataset in the upstream format.

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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rf_matid.classes import SYNTHETIC_CLASSES
from rf_matid.constants import FREQ_GRID_HZ, SPEED_OF_LIGHT, TIME_POINTS
from rf_matid.materials import (
    MATERIALS,
    MAX_LAYERS,
    itu_permittivity,
    material_class,
    multilayer_reflection,
)

TIME_FFT_LENGTH = 25600
TIME_WINDOW_BETA = 6.0
_CHUNK = 64  # samples per vectorised block (keeps temporaries in cache)


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
        spec = material_class(name)
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
    """Vectorised S11 [B, F] (complex128) for stacked draws (:mod:`rf_matid.materials` eq. 1-2, module docstring eq. 3)."""
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
    specs = [material_class(name) for name in names]
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
