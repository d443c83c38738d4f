"""One module per `harness` subcommand: argument wiring and printing only."""
