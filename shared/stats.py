"""The statistics of the plug-in contract: what users contribute, what a privatizer releases.

`Stats` maps a released family's name (`Family.name`) to an array whose leading axis is the
replica (R rows): users' clean contributions, noisy reports, or a release.
"""

from __future__ import annotations

import numpy as np

Stats = dict[str, np.ndarray]
