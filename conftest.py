"""Shared by tests/ and suites/ (the two folders `./dev tests` runs)."""

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """pytest-xdist 3.8's `--dist loadgroup` appends `@<group>` to a worker's node ids to group
    them (xdist.remote) by setting `item._nodeid`, which pytest 9 no longer reads (its node id is
    `item._id`): every xdist_group went unheeded (a module fixture meant for one worker was
    built on both, torchrun launches ran side by side). Done here as xdist does it."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        nodeid = item.nodeid
        if not groups or nodeid.rfind("@") > nodeid.rfind("]"):
            continue  # no group, or xdist named it (an older pytest)
        grouped = f"{nodeid}@{'_'.join(groups)}"
        if hasattr(item, "_id"):
            item._id = type(item._id).parse(grouped)
        else:
            item._nodeid = grouped
