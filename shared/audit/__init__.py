"""The attacker's and auditor's math, used by `privrl audit` and the tests.

  lower_bound     an empirical lower bound on epsilon (the randomizer and the central release)
  matrix_counter  the same bound for the matrix-factorization counter
  float_leaks     clean values an outsider proves from float noise; releases off their grid
  increments      is a billboard as noisy as declared (poll increments)
  reuse           LDP reports that share noise, and the trajectories they give away
  findings        what an audit reports, as text or JSON
"""
