"""Every number the app writes as text, in one place.

Each kind of place needs its own spelling, so there is one function per place
rather than one per module:

- `readout`: a value for reading in the inspector (4 significant digits);
- `significant`: chart labels and captions (3 by default, no exponent in 1e-4 … 1e6);
- `exact`: the whole float, for data-value attributes (repr: reads back the same);
- `param`: a parameter as people type it and as it travels in URLs (1.0 -> "1");
- `bound`: a parameter's bound in an "allowed" message;
- `coordinate`: SVG geometry attributes (fixed 6 decimals, trailing zeros dropped);
- `ratio`: a probability ratio, four decimals and more beside a clip bound (1.2004, not 1.2).

Texts for people use the Unicode minus (−); texts for machines (attributes, URLs) the ASCII one.
"""
from __future__ import annotations

import math

MINUS = "\u2212"


def _minus(text: str) -> str:
    return text.replace("-", MINUS)


def significant(v: float, sig: int = 3, strip: bool = False) -> str:
    """`sig` significant digits, Unicode minus, no scientific notation in 1e−4 … 1e6."""
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else MINUS + "∞"
    if v == 0:
        return "0"
    e = math.floor(math.log10(abs(v)))
    if e < -4 or e >= 6:
        mantissa, exp = f"{v:.{sig - 1}e}".split("e")
        if strip and "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        s = f"{mantissa}e{int(exp)}"
    else:
        s = f"{v:.{max(0, sig - 1 - e)}f}"
        if strip and "." in s:
            s = s.rstrip("0").rstrip(".")
    return _minus(s)


def readout(value) -> str:
    """Four significant digits for reading; the exact value rides along in data-value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if value == 0:
        return "0"
    return _minus(f"{value:.4g}")


def exact(value) -> str:
    """The shortest text that reads back as the same float."""
    return repr(value) if isinstance(value, float) else str(value)


def param(value) -> str:
    """1.0 -> "1", as people type it; other floats exactly (":g" would round)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return exact(value)


def bound(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def coordinate(value: float) -> str:
    """A number for SVG/HTML attributes: 308.5, 6, 1.25, -1770 (never '6.0' or '-0')."""
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def ratio(value: float, bounds: tuple[float, ...] = ()) -> str:
    """A probability ratio ρ: four decimals (1.2004, 0.7353, 1.0000 for 0.99999), more while the
    text would read as one of the clip `bounds` the ratio is not (1.20000003 beside a bound of 1.2);
    an exact whole number as itself ("1", the first update's ratio). Huge or tiny ratios (overflow
    guards) use `significant`."""
    v = float(value)
    if not math.isfinite(v) or v == 0 or not 1e-4 <= abs(v) < 1e6:
        return significant(v, 4, strip=True)
    if v.is_integer():
        return _minus(str(int(v)))
    digits = 4
    while digits < 12 and any(v != b and float(f"{v:.{digits}f}") == b for b in bounds):
        digits += 1
    return _minus(f"{v:.{digits}f}")
