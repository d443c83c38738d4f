"""One module per `harness` subcommand: argument wiring and printing only. Commands sit on top:
they import the jobs (golden, measure, verdict) and the core, and nothing imports them."""
