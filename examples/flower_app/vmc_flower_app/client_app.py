"""The ClientApp: each simulated SuperNode plays one vehicle of the schedule."""

from vmc_sim.flower.app_config import app_client

app = app_client()
