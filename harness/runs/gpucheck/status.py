"""A step's statuses that are not failures: the kit's exit and its summary page read this one
tuple (a module of its own: the page needs tabulate, the kit's dry run must not)."""

OK_STATUSES = ("pass", "recorded", "n/a")
