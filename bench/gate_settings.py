"""The bench server's settings: the product's, with the floors' URLs in front (bench/gate_floors.py)."""

from governance.settings import *  # noqa: F403

ROOT_URLCONF = "bench.gate_floors"
# The gate's variants are named as the gate's own URL (v1:gate-check) so a gate:check token reaches
# them; Django warns that the namespace repeats, which is the point here.
SILENCED_SYSTEM_CHECKS = [*globals().get("SILENCED_SYSTEM_CHECKS", []), "urls.W005"]
