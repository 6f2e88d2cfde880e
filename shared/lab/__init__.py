"""In-process experiments: the Python API (`simulate`, `Results`), sweeps, plots and benchmarks.

Neither a user nor a server: everything here runs the protocol inside one process, seeds as
replicas, and writes files a person reads (summary.json, figures).
"""

from .experiments import WorldSpec, run_many
from .results import Results, simulate

__all__ = ["Results", "WorldSpec", "run_many", "simulate"]
