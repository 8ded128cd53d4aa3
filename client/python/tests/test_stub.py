"""The type stub (_core.pyi) says what the extension holds: each enum it
declares has the binding's members with the binding's values. The binding
takes its enums from the C++ lists (Action: planner/plan.h's kActions), so
the stub cannot drift from them unnoticed."""
import ast
import os

import remat
from remat import _core


def stub_enums():
    path = os.path.join(os.path.dirname(remat.__file__), "_core.pyi")
    with open(path) as f:
        tree = ast.parse(f.read())
    enums = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base) == "enum.IntEnum" for base in node.bases):
            enums[node.name] = {
                stmt.targets[0].id: ast.literal_eval(stmt.value)
                for stmt in node.body if isinstance(stmt, ast.Assign)
            }
    return enums


def test_stub_enums_match_the_binding():
    enums = stub_enums()
    assert "Action" in enums and "PlanSource" in enums
    for name, members in enums.items():
        bound = getattr(_core, name)
        assert members == {k: int(v) for k, v in bound.__members__.items()}, name
