"""layers_from_torch on a small model, with PyTorch where installed (skipped
otherwise), and its message without it."""
import importlib.util
import json

import pytest

from conftest import SOURCE_DIR

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _twinpipe_package():
    try:
        import twinpipe
    except ImportError as e:
        pytest.skip(f"twinpipe package not importable (build the project; PYTHONPATH=build/python): {e}")
    return twinpipe


@pytest.mark.skipif(HAVE_TORCH, reason="torch is installed: the message without it is not reachable")
def test_without_torch_the_error_says_what_to_install():
    twinpipe = _twinpipe_package()
    with pytest.raises(ImportError, match="needs PyTorch"):
        twinpipe.layers_from_torch([], None)


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (apt-get install python3-torch): "
                                           "layers_from_torch not tested")
def test_layers_carry_the_modules_parameters_and_simulate():
    import torch

    twinpipe = _twinpipe_package()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.LayerNorm(256), torch.nn.Linear(256, 10))
    layers = twinpipe.layers_from_torch(model, torch.randn(8, 64), "cpu")
    assert [layer["params"] for layer in layers] == [sum(p.numel() for p in m.parameters()) for m in model]
    assert layers[0]["fwd_flops"] == pytest.approx(2 * 64 * 256)  # per sample
    assert layers[0]["bwd_weight_flops"] == pytest.approx(2 * 64 * 256)
    assert layers[0]["stash_bytes"] == 64 * 4  # its input, not its weight
    assert layers[0]["out_bytes"] == 256 * 4
    assert layers[1]["params"] == 0 and layers[1]["bwd_weight_flops"] == 0
    assert all(layer["cost"] > 0 for layer in layers)
    if not twinpipe.available():
        pytest.skip("twinpipe's C++ extension was not built: the layers are not simulated")
    config = json.loads((SOURCE_DIR / "examples" / "paper_costs.json").read_text())
    config["model"] = {"layers": layers, "dtype": "fp32"}
    config["pipeline"].update({"stages": 2, "partition": "gpipe"})
    config["cluster"] = {"device": "CPU", "devices": 2, "link": "inproc"}
    result = twinpipe.simulate(config)
    assert result["step_time_s"] > 0
