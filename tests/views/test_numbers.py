"""app/views/numbers.py: every number the app writes, spelled for its place."""
from __future__ import annotations

import math

import pytest

from app.views import numbers

M = "\u2212"


@pytest.mark.parametrize("value, sig, strip, text", [
    (0.0, 3, False, "0"), (1.0, 3, False, "1.00"), (1.0, 3, True, "1"), (-0.5, 3, False, f"{M}0.500"),
    (123456.0, 3, False, "123456"), (1234567.0, 3, False, "1.23e6"), (0.0001234, 3, False, "0.000123"),
    (0.00001234, 3, False, f"1.23e{M}5"), (2.5e-7, 4, True, f"2.5e{M}7"), (math.inf, 3, False, "∞"),
    (-math.inf, 3, False, f"{M}∞"), (math.nan, 3, False, "NaN"),
])
def test_significant(value, sig, strip, text):
    assert numbers.significant(value, sig, strip) == text


@pytest.mark.parametrize("value, text", [
    (3, "3"), (True, "True"), ("x", "x"), (0.0, "0"), (-0.0, "0"), (0.5, "0.5"), (-1.23456, f"{M}1.235"),
    (1e-5, "1e-05".replace("-", M)), (123456.7, "1.235e+05"),
])
def test_readout_four_significant_digits(value, text):
    assert numbers.readout(value) == text


@pytest.mark.parametrize("value, text", [(0.1, "0.1"), (1.0, "1.0"), (1 / 3, "0.3333333333333333"), (7, "7")])
def test_exact_reads_back_the_same_float(value, text):
    assert numbers.exact(value) == text
    assert float(numbers.exact(value)) == value


@pytest.mark.parametrize("value, text", [(1.0, "1"), (0.25, "0.25"), (1e20, "1e+20"), (4, "4"), (0.1 + 0.2, "0.30000000000000004")])
def test_param_as_people_type_it(value, text):
    assert numbers.param(value) == text


@pytest.mark.parametrize("value, text", [(308.5, "308.5"), (6.0, "6"), (-1770.0, "-1770"), (-0.0, "0"),
                                         (-0.0000001, "0"), (1.25, "1.25"), (1 / 3, "0.333333")])
def test_coordinate_for_svg_attributes(value, text):
    assert numbers.coordinate(value) == text


def test_bound():
    assert numbers.bound(1) == "1" and numbers.bound(0.0001) == "0.0001" and numbers.bound(1e6) == "1e+06"
