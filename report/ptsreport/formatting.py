"""Numbers as the page and summary.md print them."""

import math


def num(value) -> str:
    """Thousands separated from 1000 up, else three significant digits; n/a for NaN."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    return f"{value:.3g}"


def raw(value) -> str:
    """A CSV field for the details tables: integers as integers, floats to 4 digits."""
    if isinstance(value, str):
        return value
    if value is None or math.isnan(value):
        return ""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:.4g}"


def byte_unit(largest: float) -> tuple:
    """(divisor, label) that keeps byte values readable."""
    for divisor, label in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if largest >= divisor:
            return divisor, label
    return 1, "B"
