"""Spare capacity per node from (GPU, pod) rows. Pure."""

from __future__ import annotations

import pytest

from tests.utilization.rows import A100_80, H100_80, row
from webhook.utilization.spare import node_capacities


def test_free_gpus_free_mig_instances_and_idle_shares_per_node() -> None:
    rows = [
        row("a", 0, util=(0.0, 0.0), memory=(0.0, 0.0)),  # free
        row("a", 1, pod="p", util=(50.0, 60.0), memory=(10000.0, 10000.0)),  # half busy
        row("a", 2, pod="q", util=(10.0, 20.0), memory=(36000.0, 36000.0)),  # memory nearly full
        row("a", 3, present=False),  # gone: not counted
        row("b", 0, pod="r", model=A100_80, mig=("3g.40gb", 1)),
        row("b", 0, model=A100_80, mig=("3g.40gb", 2)),
        row("b", 0, model=A100_80, mig=("1g.10gb", 3)),
        row("c", 0, pod="s", model=H100_80),
        row("c", 0, pod="t", model=H100_80),  # one GPU, two pods: still one GPU
    ]
    nodes = {n.node: n for n in node_capacities(rows)}
    assert (nodes["a"].free_gpus, nodes["b"].free_gpus, nodes["c"].free_gpus) == (1, 0, 0)
    assert dict(nodes["b"].free_mig) == {"1g.10gb": 1, "3g.40gb": 1}
    expected_a = 1.0 + min(0.5, 1 - 10000 / 40536) + min(0.9, 1 - 36000 / 40536)
    assert nodes["a"].idle_share == pytest.approx(expected_a, abs=0.001)
    assert nodes["b"].idle_share == 0  # MIG GPUs are not shared by time
    assert nodes["c"].products == ("NVIDIA-H100-80GB-HBM3",)


@pytest.mark.parametrize("name", ["", "a" * 64, "node a", "node/a", "-node", "node\n"])
def test_nodes_whose_name_could_not_be_a_label_value_are_left_out(name: str) -> None:
    assert [n.node for n in node_capacities([row(name), row("good-node.example_1")])] == [
        "good-node.example_1"
    ]
