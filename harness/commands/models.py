"""`harness models`: the zoo, with parameter counts for both sizes."""


def add_arguments(parser):
    pass


def run(args) -> int:
    from harness.capture import FRONTENDS
    from harness.zoo import get_model, model_names

    rows = [("model", "small params", "full params", "front ends", "description")]
    for name in model_names():
        spec = get_model(name)
        frontends = ",".join(f for f in FRONTENDS if f not in spec.unsupported)
        rows.append((name, f"{spec.parameter_count('small'):,}", f"{spec.parameter_count('full'):,}",
                     frontends, spec.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.rjust(w) if 0 < i < 3 else cell.ljust(w) for i, (cell, w) in
                        enumerate(zip(row[:4], widths))) + "  " + row[4])
    return 0
