"""vmc-sim's Flower app: F-SOSA or a Flower strategy on a schedule with the co-simulation's radio."""
