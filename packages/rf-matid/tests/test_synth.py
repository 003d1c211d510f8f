"""Tests of the physics-based synthetic generator (rf_matid.synth)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rf_matid import synth
from rf_matid.classes import SUPERCLASSES, SYNTHETIC_CLASSES, superclass_of

C0 = synth.SPEED_OF_LIGHT
FREQ = np.linspace(4e9, 43.5e9, 301)


def closed_form_slab(eps: complex, thickness_m: float, freq_hz: np.ndarray) -> np.ndarray:
    """Gamma = r (1 - e^{-2j beta t}) / (1 - r^2 e^{-2j beta t}), r = (1 - n) / (1 + n)."""
    n = np.sqrt(eps)
    r = (1 - n) / (1 + n)
    p = np.exp(-2j * (2 * np.pi * freq_hz / C0) * n * thickness_m)
    return r * (1 - p) / (1 - r**2 * p)


@pytest.mark.parametrize(
    ("eps", "thickness_m"),
    [(6.31 - 0.0j, 5e-3), (5.24 - 0.5j, 60e-3), (2.71 - 0.3j, 12e-3), (1.99 - 0.1j, 0.02)],
)
def test_single_slab_recursion_and_skrf_match_closed_form(eps: complex, thickness_m: float) -> None:
    expected = closed_form_slab(eps, thickness_m, FREQ)
    eps_layers = np.full((1, FREQ.size), eps)
    recursion = synth.multilayer_reflection(eps_layers, np.array([thickness_m]), FREQ)
    cascade = synth.multilayer_reflection_skrf(eps_layers, np.array([thickness_m]), FREQ)
    np.testing.assert_allclose(recursion, expected, atol=1e-12)
    np.testing.assert_allclose(cascade, expected, atol=1e-12)


@pytest.mark.parametrize("class_name", ["glass03", "brick02"])
@pytest.mark.parametrize(("incidence", "polarization"), [(0.0, "TE"), (30.0, "TE"), (50.0, "TM")])
def test_multilayer_recursion_matches_skrf_cascade(
    class_name: str, incidence: float, polarization: str
) -> None:
    layers = synth.MATERIAL_CLASSES[class_name].layers
    eps = np.stack([synth.MATERIALS[layer.material].permittivity(FREQ) for layer in layers])
    thickness = np.array([np.mean(layer.thickness_mm) * 1e-3 for layer in layers])
    recursion = synth.multilayer_reflection(eps, thickness, FREQ, incidence, polarization)
    cascade = synth.multilayer_reflection_skrf(eps, thickness, FREQ, incidence, polarization)
    np.testing.assert_allclose(recursion, cascade, atol=1e-10)
    assert np.ptp(np.abs(recursion)) > 0.05  # a genuinely frequency-selective structure


@settings(max_examples=60, deadline=None)
@given(
    eps_real=st.lists(st.floats(1.0, 30.0), min_size=1, max_size=3),
    loss=st.floats(0.0, 10.0),
    thickness_mm=st.floats(0.0, 200.0),
    incidence=st.floats(0.0, 85.0),
    polarization=st.sampled_from(["TE", "TM"]),
)
def test_passive_multilayer_reflects_at_most_unity(
    eps_real: list[float], loss: float, thickness_mm: float, incidence: float, polarization: str
) -> None:
    eps = np.array(eps_real)[:, None] - 1j * loss * (FREQ / 4e9) ** -0.5
    thickness = np.full(len(eps_real), thickness_mm * 1e-3)
    gamma = synth.multilayer_reflection(eps, thickness, FREQ, incidence, polarization)
    assert np.all(np.isfinite(gamma))
    assert np.all(np.abs(gamma) <= 1 + 1e-9)


@pytest.mark.parametrize("eps", [2.6, 4.0, 6.31])
def test_lossless_slab_half_wave_resonance(eps: float) -> None:
    f0 = 20e9
    half_wave = C0 / f0 / (2 * np.sqrt(eps))
    freq = np.array([f0, f0 / 2])  # at f0/2 the same slab is a quarter wave: maximal reflection
    gamma = synth.multilayer_reflection(np.full((1, 2), eps + 0j), np.array([half_wave]), freq)
    assert abs(gamma[0]) < 1e-12
    assert abs(gamma[1]) == pytest.approx((eps - 1) / (eps + 1), rel=1e-12)


def test_tm_reflection_vanishes_at_brewster_angle() -> None:
    eps = 4.0
    brewster = np.degrees(np.arctan(np.sqrt(eps)))
    gamma = synth.multilayer_reflection(
        np.full((1, FREQ.size), eps + 0j), [7e-3], FREQ, brewster, "TM"
    )
    gamma_te = synth.multilayer_reflection(
        np.full((1, FREQ.size), eps + 0j), [7e-3], FREQ, brewster, "TE"
    )
    assert np.max(np.abs(gamma)) < 1e-12
    assert np.max(np.abs(gamma_te)) > 0.3


def test_itu_permittivity_follows_p2040() -> None:
    concrete = synth.MATERIALS["concrete"]
    eps = concrete.permittivity(np.array([10e9, 30e9]))
    sigma = 0.0462 * np.array([10.0, 30.0]) ** 0.7822
    np.testing.assert_allclose(eps.real, 5.24)
    np.testing.assert_allclose(-eps.imag, 17.98 * sigma / np.array([10.0, 30.0]))
    plywood = synth.MATERIALS["plywood"].permittivity(np.array([4e9, 40e9]))
    np.testing.assert_allclose(-plywood.imag, 17.98 * 0.33 / np.array([4.0, 40.0]))


def test_material_table_covers_the_class_vocabulary() -> None:
    assert tuple(synth.MATERIAL_CLASSES) == tuple(SYNTHETIC_CLASSES)
    assert {superclass_of(name) for name in synth.MATERIAL_CLASSES} == set(SUPERCLASSES)
    for spec in synth.MATERIAL_CLASSES.values():
        for layer in spec.layers:
            lo, hi = layer.thickness_mm
            assert layer.material in synth.MATERIALS and 0 < lo < hi
            eps = synth.MATERIALS[layer.material].permittivity(synth.FREQ_GRID_HZ)
            assert np.all(eps.real >= 1) and np.all(eps.imag <= 0)


def test_horn_gain_is_passive_and_matches_the_gaussian_beam_integral() -> None:
    """Integrate G over the sphere: radiated / 4 pi must be <= 1 (a passive horn), and for a
    narrow Gaussian beam sum G dOmega ~= G0 pi Theta^2 / (4 ln 2), so the 26000 / Theta^2 rule
    implies an efficiency of 26000 / (16 ln 2 (180 / pi)^2) = 0.714."""
    freq = np.array([4e9, 20e9, 43.5e9])
    theta = np.linspace(0.0, 180.0, 100_001)
    gain = synth.horn_gain(freq, theta)  # [theta, F]
    integrand = gain * 2 * np.pi * np.sin(np.radians(theta))[:, None]
    step = np.radians(theta[1] - theta[0])
    radiated = step * (integrand[1:] + integrand[:-1]).sum(axis=0) / 2  # trapezoid rule
    efficiency = radiated / (4 * np.pi)
    assert np.all(efficiency <= 1.0) and np.all(efficiency > 0.5)
    assert efficiency[-1] == pytest.approx(26000 / (16 * np.log(2) * (180 / np.pi) ** 2), rel=0.01)
    assert np.all(np.diff(synth.horn_beamwidth_deg(FREQ)) < 0)  # narrower beam at higher f


def test_simulated_echo_is_half_power_at_half_beamwidth() -> None:
    """Through simulate_s11 (noise, jitter and double bounce off): tilting the plate by half the
    beamwidth at one frequency halves the echo there (the -3 dB point of a power pattern), times
    1 / cos(theta) for the shorter image distance R = 2 (d + l_pc) cos(theta)."""
    quiet = dataclasses.replace(
        synth.DEFAULT_SETUP,
        noise_floor_db=(-400.0, -400.0),
        trace_noise=0.0,
        distance_jitter_m=0.0,
        angle_jitter_deg=0.0,
        eps_real_jitter=0.0,
        conductivity_jitter=0.0,
        cable_phase_jitter_m=0.0,
        cable_gain_jitter=0.0,
        structural_scattering=0.0,
    )
    grid = synth.FREQ_GRID_HZ
    leakage = synth.horn_leakage(grid, quiet)
    k = int(np.searchsorted(grid, 30e9))
    tilt = float(synth.horn_beamwidth_deg(grid[k : k + 1], quiet)[0] / 2)

    def echo(angle: float) -> np.ndarray:
        s11 = synth.simulate_s11("stone03", 400, angle, np.random.default_rng(3), setup=quiet)
        return np.abs(s11 - leakage)

    ratio = echo(tilt) / echo(0.0)
    assert ratio[k] == pytest.approx(0.5 / np.cos(np.radians(tilt)), rel=1e-3)
    assert ratio[0] > ratio[k] > ratio[-1]  # the beam narrows with frequency


def test_simulation_is_deterministic_for_a_seed() -> None:
    first = synth.simulate_s11("glass01", 700, 3, np.random.default_rng(5))
    again = synth.simulate_s11("glass01", 700, 3, np.random.default_rng(5))
    other = synth.simulate_s11("glass01", 700, 3, np.random.default_rng(6))
    assert first.dtype == np.complex64 and first.shape == (2048,)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert np.all(np.abs(first) < 1)


def test_batch_equals_per_sample_simulation() -> None:
    names = ["wood01", "brick02", "glass03", "stone03"]
    distances = [200, 650, 1300, 2000]
    angles = [0, 4, 7, 10]
    keys = [(name, d, a, 0) for name, d, a in zip(names, distances, angles, strict=True)]
    rngs = [synth.sample_rng(3, *key) for key in keys]
    batch = synth.simulate_batch(names, distances, angles, rngs)
    for row, key in enumerate(keys):
        single = synth.simulate_s11(key[0], key[1], key[2], synth.sample_rng(3, *key))
        np.testing.assert_array_equal(batch[row], single)


def test_echo_delay_and_level_follow_distance() -> None:
    setup = synth.DEFAULT_SETUP
    leakage = synth.horn_leakage(synth.FREQ_GRID_HZ)
    peaks = []
    for distance_mm in (400, 1500):
        s11 = synth.simulate_s11("stone03", distance_mm, 0, np.random.default_rng(0))
        time_ps, amplitude = synth.frequency_to_time(synth.FREQ_GRID_HZ, s11 - leakage)
        envelope = np.abs(amplitude)
        peak = int(np.argmax(envelope))
        expected = 2 * setup.cable_delay_s + setup.horn_delay_s
        expected += 2 * (distance_mm * 1e-3 + setup.phase_centre_m) / C0
        assert time_ps[peak] == pytest.approx(expected * 1e12, abs=40.0)  # +-1 mm jitter ~ 7 ps
        peaks.append(envelope[peak])
    assert 2.0 < peaks[0] / peaks[1] < 5.0  # 1/R spreading: (1.5 + 0.02) / (0.4 + 0.02) = 3.6


def test_frequency_to_time_of_a_unit_reflector() -> None:
    step_s = 1 / (synth.TIME_FFT_LENGTH * (synth.FREQ_GRID_HZ[1] - synth.FREQ_GRID_HZ[0]))
    delay = 1581 * step_s  # on the time grid, so the carrier peak is sampled
    s11 = np.exp(-2j * np.pi * synth.FREQ_GRID_HZ * delay)
    time_ps, amplitude = synth.frequency_to_time(synth.FREQ_GRID_HZ, np.stack([s11, 0.5 * s11]))
    assert time_ps.shape == (10240,) and amplitude.shape == (2, 10240)
    peak = int(np.argmax(amplitude[0]))
    assert peak == 1581
    assert time_ps[peak] == pytest.approx(delay * 1e12)
    assert amplitude[0, peak] == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_allclose(amplitude[1], 0.5 * amplitude[0], rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="uniformly spaced"):
        synth.frequency_to_time(np.geomspace(4e9, 43.5e9, 2048), s11)


def test_generated_files_round_trip_through_load_dataset(tmp_path) -> None:
    from rf_matid.io import load_dataset

    root = synth.generate_dataset(
        tmp_path / "ds",
        classes=["wood02", "brick01"],
        distances_mm=[250, 1900],
        angles_deg=[0, 9],
        samples_per_position=2,
        seed=11,
    )
    data = load_dataset(root, "frequency", cache_dir=tmp_path / "cache")
    assert len(data) == 16
    positions = sorted(
        zip(data.class_names, data.distance_mm.tolist(), data.angle_deg.tolist(), strict=True)
    )
    expected = sorted((c, d, a) for c in ("brick01", "wood02") for d in (250, 1900) for a in (0, 9))
    assert positions == sorted(expected * 2)
    np.testing.assert_array_equal(data.axis, synth.FREQ_GRID_HZ)
    for row in (0, 7, 15):
        index = int(data.files[row].rsplit("/", 1)[-1].split(".")[0])
        key = (data.class_names[row], int(data.distance_mm[row]), int(data.angle_deg[row]), index)
        s11 = synth.simulate_s11(*key[:3], synth.sample_rng(11, *key))
        np.testing.assert_array_equal(np.asarray(data.x[row]), s11)
    time = load_dataset(root, "time", cache_dir=tmp_path / "cache")
    assert time.x.shape[0] == 16 and time.class_names == data.class_names

    subset = synth.generate_dataset(
        tmp_path / "subset", ["wood02"], [1900], [9], samples_per_position=2, seed=11
    )
    sub = load_dataset(subset, "frequency", cache_dir=tmp_path / "cache2")
    rows = [i for i, f in enumerate(data.files) if "wood02-1900mm-9deg" in f]
    np.testing.assert_array_equal(np.asarray(sub.x), np.asarray(data.x)[rows])


def test_generate_dataset_rejects_bad_arguments(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown synthetic class"):
        synth.generate_dataset(tmp_path / "a", classes=["metal01"])
    with pytest.raises(ValueError, match="distances_mm"):
        synth.generate_dataset(tmp_path / "b", distances_mm=[200, -5])
    with pytest.raises(ValueError, match="samples_per_position"):
        synth.generate_dataset(tmp_path / "c", samples_per_position=0)
    root = synth.generate_dataset(tmp_path / "d", ["glass01"], [300], [0], write_time=False)
    with pytest.raises(FileExistsError, match="already holds samples"):
        synth.generate_dataset(root, ["glass01"], [300], [0])
