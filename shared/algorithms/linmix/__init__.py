"""Linear-mixture algorithms: private UCRL-VTR (Luyo et al.) and LinOpt-VI / LinOpt-PO (Zhou).

Importing this package registers them.
"""

from . import linopt, ucrl_vtr  # noqa: F401  (register ucrl-vtr, linopt-vi, linopt-po)
