"""When two planned values count as tied: one tolerance for every planner's greedy choice."""

TIE_TOL = 1e-9  # values this close (absolute; LSVI's scores: relative) are ties
