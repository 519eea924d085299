"""truenort: launch the kernels of truenoc bundles (.tnb) on CUDA tensors, with zero JIT.

    import torch, truenort
    b = truenort.load("decode.tnb")            # cubins selected for device 0
    print(b.softmax.signature, b.softmax.launch_rule)
    x = torch.randn(20, 100, device="cuda"); y = torch.empty_like(x)
    b.softmax(x, y, 20, 100)                   # on torch's current stream

Tensors come through DLPack (``__dlpack__``) or ``__cuda_array_interface__`` (PyTorch, CuPy,
JAX, Numba, or truenort.DeviceArray); sizes and scalars are Python numbers. Every argument is
checked against the kernel's signature before anything is launched: count, tensor or number,
dtype (when the bundle knows the element type), device, contiguity, read-only tensors for
pointers the kernel writes, integer ranges, and each tensor's elements against its extent (when
the bundle has one: every built-in template's tensors but a few whose size no parameter says). Runtime failures raise truenort.Error with the CUDA
error's name. Set TRUENORT_DRIVER=sim to run on truenoc's simulated GPU (no GPU needed).
See docs/python.md.
"""
import sys as _sys

from ._truenort import Bundle as _Bundle
from ._truenort import (DeviceArray, Error, Kernel, device_name, extent_checks, set_extent_checks, simulated,
                        synchronize, use_driver)

__all__ = ["load", "Bundle", "Kernel", "DeviceArray", "Error", "use_driver", "device_name", "simulated",
           "synchronize", "current_stream", "set_extent_checks", "extent_checks"]


def _stream_handle(stream):
    """A CUstream handle (int) from an int, a torch.cuda.Stream, a cupy Stream or a __cuda_stream__ object."""
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream: expected a CUDA stream or its handle, got a bool")
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError("stream: expected a CUDA stream or its handle, got %s" % type(stream).__name__)


def current_stream(args, device=0):
    """The current stream of the framework that owns the first tensor in args (0 if none)."""
    for a in args:
        module = type(a).__module__ or ""
        if module.startswith("torch") and "torch" in _sys.modules:
            torch = _sys.modules["torch"]
            return torch.cuda.current_stream(a.device if a.is_cuda else device).cuda_stream
        if module.startswith("cupy") and "cupy" in _sys.modules:
            return _sys.modules["cupy"].cuda.get_current_stream().ptr
        if hasattr(a, "__cuda_array_interface__") and not isinstance(a, DeviceArray):
            s = a.__cuda_array_interface__.get("stream")
            if isinstance(s, int) and s > 0:
                return s
    return 0


class BoundKernel:
    """A kernel of a loaded bundle: call it with the kernel's arguments in order."""

    def __init__(self, kernel, device):
        self._kernel = kernel
        self._device = device

    name = property(lambda self: self._kernel.name)
    params = property(lambda self: self._kernel.params, doc="[{name, type, access, element}] in order")
    signature = property(lambda self: self._kernel.signature)
    launch_rule = property(lambda self: self._kernel.launch_rule, doc="{block, grid, dynamic_shared}")
    target = property(lambda self: self._kernel.target, doc="the bundle target whose code runs here")

    def __call__(self, *args, stream=None):
        """Launch on `stream` (default: the tensors' framework's current stream)."""
        handle = current_stream(args, self._device) if stream is None else _stream_handle(stream)
        self._kernel._launch(handle, *args)

    def __repr__(self):
        return "<truenort kernel %s>" % self._kernel.signature


class Bundle:
    """A .tnb bundle loaded for one CUDA device; its kernels are attributes (or kernel(name))."""

    def __init__(self, native):
        self._native = native
        self._kernels = {}

    @property
    def kernels(self):
        return list(self._native.kernels)

    @property
    def device(self):
        return self._native.device

    def kernel(self, name):
        k = self._kernels.get(name)
        if k is None:
            k = BoundKernel(self._native.kernel(name), self._native.device)
            self._kernels[name] = k
        return k

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.kernel(name)
        except KeyError as e:
            raise AttributeError(str(e.args[0]) if e.args else name) from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.kernels))

    def __repr__(self):
        return "<truenort bundle on device %d: %s>" % (self.device, ", ".join(self.kernels))


def load(path, device=0, allow_jit=False):
    """Load a bundle file for a CUDA device (its primary context, shared with the frameworks)."""
    return Bundle(_Bundle.load(str(path), device, allow_jit))
