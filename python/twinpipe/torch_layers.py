"""Costs from a real PyTorch model: layers_from_torch profiles an
nn.Sequential (or a list of modules) layer by layer, as torchgpipe's
balance_by_time and balance_by_size do, and returns the explicit layer list
a config's "model": {"layers": [...]} takes (DESIGN.md section 6), every
figure per sample:

    layers = twinpipe.layers_from_torch(model, torch.randn(32, 1024), "cuda")
    config = {"model": {"layers": layers, "dtype": "fp32"}, ...}

  name        the module's index and class ("3:Linear")
  fwd_flops   forward FLOPs (torch.utils.flop_counter, or the profiler's
              estimates before torch 2.1), per sample
  bwd_input_flops, bwd_weight_flops
              the backward's FLOPs: the input gradient's and the
              parameters' gradient's, counted apart
  params      parameters (numel)
  out_bytes   the layer's output, per sample
  stash_bytes what autograd saves for the backward (saved-tensor hooks),
              per sample
  cost        measured forward + backward seconds of the sample batch (the
              paper's c_i: the partitioner balances it)

torch is imported only here, when called: without it this raises ImportError
saying so.
"""
import statistics
import time


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("twinpipe.layers_from_torch needs PyTorch (apt-get install python3-torch, or pip install "
                          "torch); the rest of twinpipe works without it") from None
    return torch


class _CountFlops:
    """Counts the FLOPs of what runs inside it: torch.utils.flop_counter
    where torch has it (2.1 on), else the profiler's FLOP estimates (Debian
    12's torch 1.13); both count GEMMs and convolutions as 2 m n k."""

    def __init__(self, torch):
        self.flops = 0
        try:
            from torch.utils.flop_counter import FlopCounterMode
        except ImportError:
            self._mode = None
            self._profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True)
        else:
            self._mode = FlopCounterMode(display=False)

    def __enter__(self):
        (self._mode or self._profile).__enter__()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self.flops = self._mode.get_total_flops()
        else:
            self._profile.__exit__(*exc)
            self.flops = sum(e.flops for e in self._profile.key_averages() if e.flops)
        return False


def _tensor_bytes(t):
    return t.numel() * t.element_size()


def _layers_of(module):
    torch = _torch()
    if isinstance(module, torch.nn.Sequential):
        return list(module)
    if isinstance(module, (list, tuple)) and all(isinstance(m, torch.nn.Module) for m in module):
        return list(module)
    raise TypeError(f"layers_from_torch: expected an nn.Sequential or a list of nn.Module, got {type(module).__name__}")


def _sync(torch, device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _median_time(torch, device, repeat, run):
    times = []
    for _ in range(repeat):
        _sync(torch, device)
        start = time.perf_counter()
        run()
        _sync(torch, device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def layers_from_torch(module, sample_input, device="cpu", repeat=3):
    """The explicit layer list of `module` (an nn.Sequential or a list of
    modules) measured on `sample_input` (a tensor whose first dimension is
    the batch) on `device`; figures per sample but `cost`, the measured
    seconds of forward and backward on the whole sample batch (the median of
    `repeat` runs after one warm-up)."""
    torch = _torch()
    layers = _layers_of(module)
    if not isinstance(sample_input, torch.Tensor) or sample_input.dim() < 1 or sample_input.shape[0] < 1:
        raise ValueError("layers_from_torch: sample_input must be a tensor whose first dimension is the batch")
    if repeat < 1:
        raise ValueError(f"layers_from_torch: repeat must be at least 1, got {repeat}")
    batch = sample_input.shape[0]
    x = sample_input.to(device)
    out = []
    for index, layer in enumerate(layers):
        layer = layer.to(device)
        name = f"{index}:{type(layer).__name__}"
        params = sum(p.numel() for p in layer.parameters())
        x_in = x.detach().requires_grad_(x.is_floating_point())

        # Forward FLOPs, and what autograd stashes for the backward (not
        # the parameters it keeps a reference to).
        param_ptrs = {p.data_ptr() for p in layer.parameters()}
        stashed = []

        def pack(t):
            if t.data_ptr() not in param_ptrs:
                stashed.append(_tensor_bytes(t))
            return t

        with _CountFlops(torch) as fwd_counter, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = layer(x_in)
        if not isinstance(y, torch.Tensor):
            raise TypeError(f"layers_from_torch: layer {name} returns {type(y).__name__}; each layer must return "
                            "one tensor (the next layer's input)")
        fwd_flops = fwd_counter.flops
        grad = torch.ones_like(y) if y.is_floating_point() else None
        # Backward FLOPs: the input gradient, then the weight gradient.
        bwd_input_flops = bwd_weight_flops = 0
        weights = [p for p in layer.parameters() if p.requires_grad]
        if grad is not None and y.requires_grad:
            if x_in.requires_grad:
                with _CountFlops(torch) as counter:
                    torch.autograd.grad(y, [x_in], grad, retain_graph=True, allow_unused=True)
                bwd_input_flops = counter.flops
            if weights:
                with _CountFlops(torch) as counter:
                    torch.autograd.grad(y, weights, grad, retain_graph=True, allow_unused=True)
                bwd_weight_flops = counter.flops

        # Measured times: one warm-up, then the median of `repeat`.
        def forward():
            return layer(x_in)

        def forward_backward():
            z = layer(x_in)
            if grad is not None and z.requires_grad:
                torch.autograd.backward(z, grad)

        forward_backward()
        fwd_s = _median_time(torch, device, repeat, forward)
        total_s = _median_time(torch, device, repeat, forward_backward)
        layer.zero_grad(set_to_none=True)

        entry = {
            "name": name,
            "fwd_flops": fwd_flops / batch,
            "bwd_input_flops": bwd_input_flops / batch,
            "bwd_weight_flops": bwd_weight_flops / batch,
            "params": params,
            "out_bytes": _tensor_bytes(y) / batch,
            "stash_bytes": sum(stashed) / batch,
            "cost": max(total_s, fwd_s),
        }
        out.append(entry)
        x = y.detach()
    return out
