"""The ServerApp: runs what the run config names (vmc_sim.flower.app_config) and writes its ``out``."""

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vmc_sim.flower.app_config import serve_app

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Replay the schedule with F-SOSA, or run the Flower strategy, over the simulated SuperNodes."""
    serve_app(grid, context.run_config)
