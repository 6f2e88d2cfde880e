"""Helpers the tests share (no test module imports another): apps, live servers, CLI runs,
data sets; and the toy plug-ins servers load with PRIVRL_PLUGINS=support.<module>."""
