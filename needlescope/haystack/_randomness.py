"""Fast seeded random draws shared by the text generators."""

from __future__ import annotations

import sys
from array import array
from random import Random


def random_u16(rng: Random, count: int) -> array[int]:
    values = array("H", rng.randbytes(2 * count))
    if sys.byteorder == "big":
        values.byteswap()  # the same seed must give the same text on every machine
    return values
