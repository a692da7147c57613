"""The bench server's settings: the product's, with the floors' URLs in front (bench/gate_floors.py)."""

from governance.settings import *  # noqa: F403

ROOT_URLCONF = "bench.gate_floors"
