"""privrl's shared library: worlds, privacy mechanisms, learners and runs (pure numpy, no I/O)."""
