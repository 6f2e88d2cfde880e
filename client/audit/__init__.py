"""`privrl audit`: the attacker's and auditor's tools that work over the wire.

  server        (privrl.client.audit.server_attack) an attack on a server over its public routes
                only: harvest, try to re-derive the published noise, look for raw data, and
                check released noise against its declaration
  proxy         (privrl.client.audit.proxy) a logging reverse proxy between users and a server
                that records what crosses the wire per run and flags raw statistics in LDP
                reports
  replay-proxy  (privrl.client.audit.replay) the episode-replay attack on LDP users

Their math lives in `privrl.audit` (shared/audit/): the reuse detector, the increment test, the
floating-point leak tests, the randomizer's empirical lower bound and what an audit reports.
"""
