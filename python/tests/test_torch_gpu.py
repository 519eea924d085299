"""On a GPU: the library's rmsnorm (bf16) and softmax (f32) through the Python package, against
PyTorch's, on torch's current stream; a W8A8 linear layer on torch.float8_e4m3fn tensors. Skipped without PyTorch, without a CUDA device, or on the
simulated driver. Environment: TRUENOC (the truenoc executable), TRUENOC_EXAMPLES (examples/).
"""
import os
import subprocess
import tempfile
import unittest

try:
    import torch
except ImportError:  # the package does not need it
    torch = None

import truenort

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.environ.get("TRUENOC_EXAMPLES", os.path.join(HERE, "..", "..", "examples"))


def gpu_reason():
    if torch is None:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if os.environ.get("TRUENORT_DRIVER", "") not in ("", "cuda"):
        return "TRUENORT_DRIVER selects another driver"
    return None


@unittest.skipIf(gpu_reason() is not None, gpu_reason() or "")
class AgainstTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        major, minor = torch.cuda.get_device_capability()
        path = os.path.join(cls.tmp.name, "decode.tnb")
        subprocess.run([os.environ["TRUENOC"], "build", os.path.join(EXAMPLES, "decode.toml"), "--targets",
                        "sm_%d%d" % (major, minor), "-o", path], check=True)
        cls.bundle = truenort.load(path, device=torch.cuda.current_device())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_rmsnorm_bf16(self):
        rows, cols, eps = 64, 4096, 1e-5
        x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):  # the kernel goes to torch's current stream
            side.wait_stream(torch.cuda.default_stream())
            self.bundle.rmsnorm(x, w, y, rows, cols, eps)
        torch.cuda.synchronize()
        xf = x.float()
        want = xf * torch.rsqrt(xf.pow(2).mean(dim=1, keepdim=True) + eps) * w.float()
        # one bf16 rounding of the output on top of f32 arithmetic
        torch.testing.assert_close(y.float(), want, rtol=2 ** -8 + 1e-5, atol=1e-6)

    def test_softmax_f32(self):
        for rows, cols in ((1000, 100), (33, 4097), (8, 32768)):
            x = torch.randn(rows, cols, device="cuda") * 4
            y = torch.empty_like(x)
            self.bundle.softmax(x, y, rows, cols)
            torch.cuda.synchronize()
            torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-7)

    def test_w8a8_linear_from_float8_tensors(self):
        """examples/fp8_linear.toml's per-channel layer on torch.float8_e4m3fn tensors: passed as
        themselves where torch's DLPack export describes fp8, else as their uint8 views."""
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < (8, 9) or not hasattr(torch, "float8_e4m3fn"):
            self.skipTest("fp8 tensor cores need sm_89 or newer, and torch.float8_e4m3fn")
        path = os.path.join(self.tmp.name, "fp8_linear.tnb")
        target = "sm_90a" if major == 9 else "sm_%d%d" % (major, minor)
        subprocess.run([os.environ["TRUENOC"], "build", os.path.join(EXAMPLES, "fp8_linear.toml"), "--targets", target,
                        "-o", path], check=True)
        lib = truenort.load(path, device=torch.cuda.current_device())

        def codes(t):
            try:
                t.__dlpack__()
                return t
            except (BufferError, RuntimeError, TypeError):
                return t.view(torch.uint8)

        m, n, k = 96, 384, 1024
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda") * 0.05
        w_scales = (w.abs().amax(dim=1) / 448).float()
        w8 = (w / w_scales[:, None]).to(torch.float8_e4m3fn)
        x8 = torch.empty(m, k, device="cuda", dtype=torch.float8_e4m3fn)
        xs = torch.empty(m, device="cuda", dtype=torch.float32)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        lib.quantize_tokens(x, codes(x8), xs, m, k)
        lib.linear_fp8(codes(x8), codes(w8), y, w_scales, xs, m, n, k, k, k, n, 1, 0, 0, 0, 1.0, 0.0)
        torch.cuda.synchronize()
        # The codes times their scales are x within E4M3's rounding (2^-4 relative, 2^-9 of the
        # row's scale near zero).
        a = x8.float() * xs[:, None]
        self.assertTrue(bool(((a - x.float()).abs() <= x.float().abs() * 2 ** -4 + xs[:, None] * 2 ** -9).all()))
        # y is the codes' product within the fp8 tensor cores' sums and one bf16 rounding.
        b = w8.float() * w_scales[:, None]
        want = a.double() @ b.double().T
        bound = (a.abs().double() @ b.abs().double().T) * (-(-k // 32) * 2 ** -13) + want.abs() * 2 ** -8
        self.assertTrue(bool(((y.double() - want).abs() <= bound + 1e-30).all()))

    def test_checks_against_torch_tensors(self):
        x = torch.randn(4, 8, device="cuda")
        with self.assertRaises(ValueError):
            self.bundle.softmax(x.double(), x, 4, 8)
        with self.assertRaises(ValueError):
            self.bundle.softmax(x.t(), x, 8, 4)  # not contiguous
        with self.assertRaises(ValueError):
            self.bundle.softmax(x.cpu(), x, 4, 8)


if __name__ == "__main__":
    unittest.main()
