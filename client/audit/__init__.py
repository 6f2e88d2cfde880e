"""`privrl audit`: test a trust boundary from outside, the way an attacker and an auditor would.

  server   (privrl.client.audit.server_attack) an attack on a server over its public routes
           only: harvest, try to re-derive the published noise, look for raw data, and check
           released noise against its declaration
  proxy    (privrl.client.audit.proxy)    a logging reverse proxy between users and a server
           that records what crosses the wire per run and flags raw statistics in LDP reports
  reuse    (privrl.client.audit.reuse)    LDP reports (or one-report billboard increments)
           compared pairwise: noise drawn again, and the trajectories it gives away
  findings (privrl.client.audit.findings) what both report, as text or JSON

The randomizer audit runs in process and lives in `privrl.lab.auditing`; the floating-point leak
tests all three use (clean values read off float noise, releases off their grid) live in
`privrl.lab.float_leaks`.
"""
