"""On a GPU: the library's rmsnorm (bf16) and softmax (f32) through the Python package, against
PyTorch's, on torch's current stream. Skipped without PyTorch, without a CUDA device, or on the
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
