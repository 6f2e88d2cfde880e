"""Linear-MDP algorithms: private batched LSVI-UCB (Luyo et al., Alg. 2) and private LSVI-UCB
with adaptive low switching (Ngo, Vietri & Wu, Alg. 1), JDP only.

Importing this package registers them.
"""

from . import batched, switching  # noqa: F401  (register lsvi-ucb-batched, lsvi-ucb-switching)
