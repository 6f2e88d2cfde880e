"""Linear-mixture algorithms: private UCRL-VTR and UCRL-VTR+ (Luyo et al.), LinOpt-VI / -PO (Zhou).

Importing this package registers them.
"""

from . import linopt, ucrl_vtr, vtr_plus  # noqa: F401  (ucrl-vtr, -plus, linopt-vi, -po)
