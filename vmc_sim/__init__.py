"""vmc-sim: the co-simulation layer where mobility (SUMO) and the federated core meet."""
