"""Secure aggregation with distributed noise (docs/explanation/secure-aggregation.md).

  shamir.py    Shamir secret sharing over a prime field (written here, small)
  crypto.py    X25519 agreement, HKDF, AES-GCM and the ChaCha20 mask generator (`cryptography`)
  protocol.py  the SecAgg+ rounds as pure message-passing steps: `UserSession` (a user's side)
               and `CohortAggregator` (the server's state machine), and `run_cohort` (in process)
  spec.py      the run's public assumptions: dropout fraction, collusion fraction, modulus
  accounting.py  the zCDP cost of a sum of discrete Gaussian shares (Kairouz, Liu & Steinke 2021)
  skellam.py   Skellam shares, their Renyi bound at integer orders (Agarwal, Kairouz & Liu 2021)
  boundary.py  the trust boundary `secagg` and its cohort privatizer

This package's `__init__` imports nothing: the configuration imports `spec` without the rest.
"""
