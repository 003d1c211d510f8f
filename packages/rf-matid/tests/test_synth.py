"""Tests of the physics-based synthetic generator (rf_matid.synth)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rf_matid import synth
from rf_matid.constants import FREQ_GRID_HZ, SPEED_OF_LIGHT
from rf_matid.synth_dataset import sample_rng

C0 = SPEED_OF_LIGHT
FREQ = np.linspace(4e9, 43.5e9, 301)


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
    grid = FREQ_GRID_HZ
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
    rngs = [sample_rng(3, *key) for key in keys]
    batch = synth.simulate_batch(names, distances, angles, rngs)
    for row, key in enumerate(keys):
        single = synth.simulate_s11(key[0], key[1], key[2], sample_rng(3, *key))
        np.testing.assert_array_equal(batch[row], single)


def test_echo_delay_and_level_follow_distance() -> None:
    setup = synth.DEFAULT_SETUP
    leakage = synth.horn_leakage(FREQ_GRID_HZ)
    peaks = []
    for distance_mm in (400, 1500):
        s11 = synth.simulate_s11("stone03", distance_mm, 0, np.random.default_rng(0))
        time_ps, amplitude = synth.frequency_to_time(FREQ_GRID_HZ, s11 - leakage)
        envelope = np.abs(amplitude)
        peak = int(np.argmax(envelope))
        expected = 2 * setup.cable_delay_s + setup.horn_delay_s
        expected += 2 * (distance_mm * 1e-3 + setup.phase_centre_m) / C0
        assert time_ps[peak] == pytest.approx(expected * 1e12, abs=40.0)  # +-1 mm jitter ~ 7 ps
        peaks.append(envelope[peak])
    assert 2.0 < peaks[0] / peaks[1] < 5.0  # 1/R spreading: (1.5 + 0.02) / (0.4 + 0.02) = 3.6


def test_frequency_to_time_of_a_unit_reflector() -> None:
    step_s = 1 / (synth.TIME_FFT_LENGTH * (FREQ_GRID_HZ[1] - FREQ_GRID_HZ[0]))
    delay = 1581 * step_s  # on the time grid, so the carrier peak is sampled
    s11 = np.exp(-2j * np.pi * FREQ_GRID_HZ * delay)
    time_ps, amplitude = synth.frequency_to_time(FREQ_GRID_HZ, np.stack([s11, 0.5 * s11]))
    assert time_ps.shape == (10240,) and amplitude.shape == (2, 10240)
    peak = int(np.argmax(amplitude[0]))
    assert peak == 1581
    assert time_ps[peak] == pytest.approx(delay * 1e12)
    assert amplitude[0, peak] == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_allclose(amplitude[1], 0.5 * amplitude[0], rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="uniformly spaced"):
        synth.frequency_to_time(np.geomspace(4e9, 43.5e9, 2048), s11)
