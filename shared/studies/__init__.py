"""Research tooling around the simulator: the frontier study (`privrl frontier`), its cases and
its decided thresholds. Nothing in the simulator, the server or the users imports it."""
