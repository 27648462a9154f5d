"""Spot capacity as real clouds show it: traces, a model fitted to them, deadline policies and replays.

`traces` reads the public spot traces (skypilot-org/spot-traces, the data of "Can't Be Late", NSDI '24) and
a user's own interruption log into `SpotTrace` values; `model` fits, per provider, instance type, zone and
fleet size, how long spot capacity lasts and how long it stays away (`FleetLaw`); `policy` runs a job
through an availability timeline under a deadline policy (on-demand only, spot then on-demand, Uniform
Progress, Srift's plan-aware policy); `replay` runs a plan through every applicable trace window and beside
it the same policy on timelines drawn from the fitted model. Pure engines: no database, no HTTP.
"""
