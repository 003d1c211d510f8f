"""Tests of the synthetic classes' materials and slab reflection (rf_matid.materials)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rf_matid import materials
from rf_matid.classes import SUPERCLASSES, SYNTHETIC_CLASSES, superclass_of
from rf_matid.constants import FREQ_GRID_HZ, SPEED_OF_LIGHT

C0 = SPEED_OF_LIGHT
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
    recursion = materials.multilayer_reflection(eps_layers, np.array([thickness_m]), FREQ)
    cascade = materials.multilayer_reflection_skrf(eps_layers, np.array([thickness_m]), FREQ)
    np.testing.assert_allclose(recursion, expected, atol=1e-12)
    np.testing.assert_allclose(cascade, expected, atol=1e-12)


@pytest.mark.parametrize("class_name", ["glass03", "brick02"])
@pytest.mark.parametrize(("incidence", "polarization"), [(0.0, "TE"), (30.0, "TE"), (50.0, "TM")])
def test_multilayer_recursion_matches_skrf_cascade(
    class_name: str, incidence: float, polarization: str
) -> None:
    layers = materials.MATERIAL_CLASSES[class_name].layers
    eps = np.stack([materials.MATERIALS[layer.material].permittivity(FREQ) for layer in layers])
    thickness = np.array([np.mean(layer.thickness_mm) * 1e-3 for layer in layers])
    recursion = materials.multilayer_reflection(eps, thickness, FREQ, incidence, polarization)
    cascade = materials.multilayer_reflection_skrf(eps, thickness, FREQ, incidence, polarization)
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
    gamma = materials.multilayer_reflection(eps, thickness, FREQ, incidence, polarization)
    assert np.all(np.isfinite(gamma))
    assert np.all(np.abs(gamma) <= 1 + 1e-9)


@pytest.mark.parametrize("eps", [2.6, 4.0, 6.31])
def test_lossless_slab_half_wave_resonance(eps: float) -> None:
    f0 = 20e9
    half_wave = C0 / f0 / (2 * np.sqrt(eps))
    freq = np.array([f0, f0 / 2])  # at f0/2 the same slab is a quarter wave: maximal reflection
    gamma = materials.multilayer_reflection(np.full((1, 2), eps + 0j), np.array([half_wave]), freq)
    assert abs(gamma[0]) < 1e-12
    assert abs(gamma[1]) == pytest.approx((eps - 1) / (eps + 1), rel=1e-12)


def test_tm_reflection_vanishes_at_brewster_angle() -> None:
    eps = 4.0
    brewster = np.degrees(np.arctan(np.sqrt(eps)))
    gamma = materials.multilayer_reflection(
        np.full((1, FREQ.size), eps + 0j), [7e-3], FREQ, brewster, "TM"
    )
    gamma_te = materials.multilayer_reflection(
        np.full((1, FREQ.size), eps + 0j), [7e-3], FREQ, brewster, "TE"
    )
    assert np.max(np.abs(gamma)) < 1e-12
    assert np.max(np.abs(gamma_te)) > 0.3


def test_itu_permittivity_follows_p2040() -> None:
    concrete = materials.MATERIALS["concrete"]
    eps = concrete.permittivity(np.array([10e9, 30e9]))
    sigma = 0.0462 * np.array([10.0, 30.0]) ** 0.7822
    np.testing.assert_allclose(eps.real, 5.24)
    np.testing.assert_allclose(-eps.imag, 17.98 * sigma / np.array([10.0, 30.0]))
    plywood = materials.MATERIALS["plywood"].permittivity(np.array([4e9, 40e9]))
    np.testing.assert_allclose(-plywood.imag, 17.98 * 0.33 / np.array([4.0, 40.0]))


def test_material_table_covers_the_class_vocabulary() -> None:
    assert tuple(materials.MATERIAL_CLASSES) == tuple(SYNTHETIC_CLASSES)
    assert {superclass_of(name) for name in materials.MATERIAL_CLASSES} == set(SUPERCLASSES)
    for spec in materials.MATERIAL_CLASSES.values():
        for layer in spec.layers:
            lo, hi = layer.thickness_mm
            assert layer.material in materials.MATERIALS and 0 < lo < hi
            eps = materials.MATERIALS[layer.material].permittivity(FREQ_GRID_HZ)
            assert np.all(eps.real >= 1) and np.all(eps.imag <= 0)
