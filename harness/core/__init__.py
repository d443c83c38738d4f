"""Shared ground for the three jobs: nothing here imports from golden/, measure/, verdict/ or
the commands. One module per concern: exit codes and errors (exits), every environment
variable (settings), where the project and its commit are (project), seeds/devices/fingerprint
(env), atomic writes (files), units (units), tables (table), dynamo's counters (dynamo), the
model registry (zoo)."""
