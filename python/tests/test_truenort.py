"""The Python package without a GPU: loading, signatures, launch rules, argument checks and
launches on truenoc's simulated driver (TRUENORT_DRIVER=sim, docs/simulator.md).

Environment: TRUENOC (the truenoc executable, to build the test bundle), TRUENORT_DRIVER (the
simulated driver; ctest sets both), TRUENOC_EXAMPLES (examples/ of the sources).
"""
import ctypes
import math
import os
import random
import struct
import subprocess
import tempfile
import unittest

import truenort

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.environ.get("TRUENOC_EXAMPLES", os.path.join(HERE, "..", "..", "examples"))


def setUpModule():
    global BUNDLE_PATH, BUNDLE, TMP
    TMP = tempfile.TemporaryDirectory()
    BUNDLE_PATH = os.path.join(TMP.name, "decode.tnb")
    # PTX and IR only (no ptxas needed): the simulated driver runs each kernel's IR.
    subprocess.run([os.environ["TRUENOC"], "build", os.path.join(EXAMPLES, "decode.toml"), "--ptx-only",
                    "--targets", "sm_80,sm_90", "-o", BUNDLE_PATH], check=True)
    BUNDLE = truenort.load(BUNDLE_PATH)


def tearDownModule():
    TMP.cleanup()


def build(name, toml):
    """Builds a spec (PTX and IR only: the simulated driver runs the IR) and loads the bundle."""
    spec = os.path.join(TMP.name, name + ".toml")
    with open(spec, "w") as f:
        f.write(toml)
    path = os.path.join(TMP.name, name + ".tnb")
    subprocess.run([os.environ["TRUENOC"], "build", spec, "--ptx-only", "-o", path], check=True)
    return truenort.load(path)


def f32(values):
    return struct.pack("%df" % len(values), *values)


def array(values, dtype="float32", readonly=False):
    return truenort.DeviceArray.from_bytes(f32(values), [len(values)], dtype, readonly=readonly)


class FakeCai:
    """A tensor as a framework would describe it through __cuda_array_interface__."""

    def __init__(self, base, shape=None, strides=None, typestr="<f4"):
        cai = base.__cuda_array_interface__
        self.__cuda_array_interface__ = {"data": cai["data"], "shape": tuple(shape or cai["shape"]),
                                         "typestr": typestr, "strides": strides, "version": 3}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class FakeDlpack:
    """A tensor as a framework exports it through __dlpack__ (the capsule made with ctypes)."""

    def __init__(self, base, code=2, bits=32, device_type=2, device_id=0):
        self.shape = (ctypes.c_int64 * 1)(base.shape[0])
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = base.__cuda_array_interface__["data"][0]
        t.device = DLDevice(device_type, device_id)
        t.ndim = 1
        t.dtype = DLDataType(code, bits, 1)
        t.shape = self.shape
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.managed), b"dltensor", None)


class Loading(unittest.TestCase):
    def test_kernels_signatures_and_launch_rules(self):
        self.assertIn("vadd", BUNDLE.kernels)
        self.assertIn("softmax", BUNDLE.kernels)
        self.assertEqual(BUNDLE.vadd.signature,
                         "vadd(a: ptr.global read f32, b: ptr.global read f32, c: ptr.global write f32, n: u32)")
        self.assertEqual(BUNDLE.vadd.launch_rule, {"block": [256], "grid": ["ceil_div(n, 256)"], "dynamic_shared": "0"})
        self.assertEqual(BUNDLE.vadd.params[2],
                         {"name": "c", "type": "ptr.global", "access": "write", "element": "f32", "extent": "n"})
        self.assertEqual(BUNDLE.vadd.params[3], {"name": "n", "type": "u32"})
        # read as raw 16-bit words; the template declares the element type (Template::elements)
        self.assertEqual(BUNDLE.rmsnorm.params[0]["element"], "bf16")
        # stored as raw u32 words; the template declares the element type (Template::elements)
        self.assertEqual(BUNDLE.argmax.params[1],
                         {"name": "index", "type": "ptr.global", "access": "write", "element": "u32", "extent": "rows"})
        self.assertEqual(BUNDLE.vadd.target, "sm_90")  # the simulated device is an sm_90
        self.assertTrue(truenort.simulated())

    def test_unknown_kernel(self):
        with self.assertRaises(AttributeError) as e:
            BUNDLE.no_such_kernel
        self.assertIn("no kernel 'no_such_kernel'", str(e.exception))

    def test_missing_and_damaged_bundles_raise_error(self):
        with self.assertRaises(truenort.Error) as e:
            truenort.load(os.path.join(TMP.name, "missing.tnb"))
        self.assertIn("missing.tnb", str(e.exception))
        damaged = os.path.join(TMP.name, "damaged.tnb")
        with open(BUNDLE_PATH, "rb") as f:
            data = bytearray(f.read())
        data[200] ^= 0xFF
        with open(damaged, "wb") as f:
            f.write(bytes(data))
        with self.assertRaises(truenort.Error) as e:
            truenort.load(damaged)
        self.assertIn("corrupt", str(e.exception))


class Launching(unittest.TestCase):
    def test_vadd_matches_python(self):
        n = 1000
        a = [random.uniform(-100, 100) for _ in range(n)]
        b = [random.uniform(-100, 100) for _ in range(n)]
        c = truenort.DeviceArray.zeros([n], "float32")
        BUNDLE.vadd(array(a), array(b), c, n)
        got = struct.unpack("%df" % n, c.to_bytes())
        want = struct.unpack("%df" % n, f32([x + y for x, y in zip(struct.unpack("%df" % n, f32(a)),
                                                                   struct.unpack("%df" % n, f32(b)))]))
        self.assertEqual(got, want)

    def test_softmax_matches_python(self):
        rows, cols = 3, 37
        x = [random.uniform(-5, 5) for _ in range(rows * cols)]
        y = truenort.DeviceArray.zeros([rows, cols], "float32")
        BUNDLE.softmax(truenort.DeviceArray.from_bytes(f32(x), [rows, cols], "float32"), y, rows, cols)
        got = struct.unpack("%df" % (rows * cols), y.to_bytes())
        for r in range(rows):
            row = x[r * cols:(r + 1) * cols]
            m = max(row)
            total = sum(math.exp(v - m) for v in row)
            for c in range(cols):
                self.assertAlmostEqual(got[r * cols + c], math.exp(row[c] - m) / total, delta=1e-6)

    def test_cuda_array_interface_and_dlpack_objects(self):
        n = 64
        a = array([1.0] * n)
        c = truenort.DeviceArray.zeros([n], "float32")
        BUNDLE.vadd(FakeCai(a), FakeDlpack(a), c, n, stream=0)
        self.assertEqual(struct.unpack("%df" % n, c.to_bytes()), (2.0,) * n)

    def test_empty_grid_launches_nothing(self):
        c = truenort.DeviceArray.zeros([4], "float32")
        BUNDLE.vadd(c, c, c, 0)
        self.assertEqual(c.to_bytes(), bytes(16))


class ArgumentChecks(unittest.TestCase):
    def setUp(self):
        self.a = array([1.0] * 8)
        self.c = truenort.DeviceArray.zeros([8], "float32")

    def check(self, error, text, *args, **kw):
        with self.assertRaises(error) as e:
            BUNDLE.vadd(*args, **kw)
        self.assertIn(text, str(e.exception))

    def test_count(self):
        self.check(TypeError, "vadd() takes 4 arguments (3 given)", self.a, self.a, self.c)

    def test_numbers(self):
        self.check(ValueError, "argument 4 ('n', u32): -1 does not fit u32", self.a, self.a, self.c, -1)
        self.check(ValueError, "4294967296 does not fit u32", self.a, self.a, self.c, 2 ** 32)
        self.check(TypeError, "argument 4 ('n', u32): expected an int, got a float", self.a, self.a, self.c, 8.0)
        self.check(TypeError, "expected a Python number, got DeviceArray", self.a, self.a, self.c, self.a)

    def test_tensors(self):
        self.check(TypeError, "argument 1 ('a', ptr.global): expected a CUDA tensor", "x", self.a, self.c, 8)
        self.check(ValueError, "the kernel's elements are float32, the tensor is float64",
                   truenort.DeviceArray.zeros([8], "float64"), self.a, self.c, 8)
        self.check(ValueError, "the kernel's elements are float32, the tensor is bfloat16",
                   FakeDlpack(self.a, code=4, bits=16), self.a, self.c, 8)
        self.check(ValueError, "the tensor is not contiguous", FakeCai(self.a, shape=[4], strides=(8,)), self.a, self.c, 4)
        self.check(ValueError, "argument 3 ('c', ptr.global): the kernel writes through this pointer, the tensor is read-only",
                   self.a, self.a, array([0.0] * 8, readonly=True), 8)
        self.check(ValueError, "not in CUDA device memory (DLPack device type 1)", FakeDlpack(self.a, device_type=1),
                   self.a, self.c, 8)
        self.check(ValueError, "the tensor is on CUDA device 1, the bundle was loaded for device 0",
                   FakeDlpack(self.a, device_id=1), self.a, self.c, 8)

    def test_declared_bf16_elements(self):
        x = truenort.DeviceArray.zeros([2, 8], "float32")
        with self.assertRaises(ValueError) as e:
            BUNDLE.rmsnorm(x, x, x, 2, 8, 1e-5)
        self.assertIn("argument 1 ('x', ptr.global): the kernel's elements are bfloat16, the tensor is float32", str(e.exception))
        ones = struct.pack("16H", *([0x3F80] * 16))  # bf16 1.0
        xb = truenort.DeviceArray.from_bytes(ones, [2, 8], "bfloat16")
        wb = truenort.DeviceArray.from_bytes(ones[:16], [8], "bfloat16")
        yb = truenort.DeviceArray.zeros([2, 8], "bfloat16")
        BUNDLE.rmsnorm(xb, wb, yb, 2, 8, 0.0)
        self.assertEqual(struct.unpack("16H", yb.to_bytes()), (0x3F80,) * 16)  # 1 / sqrt(mean(1)) * 1

    def test_read_only_inputs_are_fine(self):
        BUNDLE.vadd(array([1.0] * 8, readonly=True), self.a, self.c, 8)
        self.assertEqual(struct.unpack("8f", self.c.to_bytes()), (2.0,) * 8)

    def test_streams(self):
        self.check(TypeError, "stream: expected a CUDA stream or its handle, got str", self.a, self.a, self.c, 8,
                   stream="s")
        dl = FakeDlpack(self.a)
        BUNDLE.vadd(dl, self.a, self.c, 8)
        self.assertEqual(dl.streams, [1])  # the default stream, as DLPack spells it

    def test_tensors_smaller_than_the_extents_are_refused(self):
        # softmax's x and y hold rows * cols elements (Template::extents): self.a and self.c have 8
        big = truenort.DeviceArray.zeros([9], "float32")
        for args, text in [((self.a, self.c, 3, 3), "argument 1 ('x', ptr.global): the launch needs 9 elements "
                                                     "(rows * cols), the tensor has 8"),
                           ((big, self.c, 3, 3), "argument 2 ('y', ptr.global): the launch needs 9 elements"),
                           ((self.a, self.c, 2 ** 31, 2 ** 31), "extent of 'x' (rows * cols) overflows 64 bits")]:
            with self.assertRaises(ValueError) as e:
                BUNDLE.softmax(*args)
            self.assertIn("softmax(): " + text, str(e.exception))
        BUNDLE.softmax(self.a, self.c, 2, 4)
        BUNDLE.softmax(big, self.c, 1, 8)  # a larger tensor is fine

    def test_the_runtimes_extent_checks_can_be_turned_on(self):
        before = truenort.extent_checks()
        try:
            truenort.set_extent_checks(True)
            self.assertTrue(truenort.extent_checks())
            BUNDLE.softmax(self.a, self.c, 2, 4)  # on the simulator, confined to the 8 elements of each
            truenort.synchronize()
            self.assertEqual(struct.unpack("8f", self.c.to_bytes()), (0.25,) * 8)
            truenort.set_extent_checks(False)
            self.assertFalse(truenort.extent_checks())
        finally:
            truenort.set_extent_checks(before)


class TensorMaps(unittest.TestCase):
    """A kernel with a tmap parameter (test/gpu/tma_tiles.tir, a TMA load per block): the runtime
    encodes the map from the launch rule, so Python passes pointers and sizes only."""

    def test_a_tma_kernel_takes_no_tensor_map_argument(self):
        tir = os.path.join(HERE, "..", "..", "test", "gpu", "tma_tiles.tir")
        tiles = build("tma", '[bundle]\nname = "tma"\ntargets = ["sm_90"]\n\n[[kernel]]\ntir = "%s"\nkernel = "tiles"\n'
                      'block = [64]\ngrid = ["ceil_div(cols, 16)", "ceil_div(rows, 8)"]\n'
                      'tensor_maps = { src_map = { source = "src", element = "f32", dims = ["cols", "rows"], '
                      'row_stride = "ld * 4", box = [16, 8] } }\n' % tir).tiles
        self.assertEqual(tiles.signature,
                         "tiles(src: ptr.global read f32, dst: ptr.global write f32, cols: u32, rows: u32, ld: u32)")
        self.assertEqual([p["name"] for p in tiles.params], ["src", "dst", "cols", "rows", "ld"])
        self.assertEqual(tiles.launch_rule["tensor_maps"],
                         ["src_map = src as f32 [cols, rows] row_stride ld * 4 box [16, 8] swizzle 0"])
        cols, rows, ld = 37, 21, 40  # partial boxes at both edges, padded rows
        src = struct.unpack("%df" % (rows * ld), f32([random.uniform(-100, 100) for _ in range(rows * ld)]))
        dst = truenort.DeviceArray.zeros([rows * cols], "float32")
        tiles(array(src), dst, cols, rows, ld)
        got = struct.unpack("%df" % (rows * cols), dst.to_bytes())
        self.assertEqual(list(got), [src[r * ld + c] for r in range(rows) for c in range(cols)])
        with self.assertRaises(TypeError):  # a tensor map is not an argument
            tiles(array(src), array([0.0]), dst, cols, rows, ld)
        with self.assertRaises(truenort.Error) as e:  # rows of 24 bytes: no tensor map can have them
            tiles(array(src), dst, cols, rows, 6)
        self.assertIn("tensor map 'src_map': row_stride = 24 bytes", str(e.exception))
        with self.assertRaises(truenort.Error) as e:  # a failing launch rule: 2^17 blocks along y
            tiles(array(src), dst, cols, 2 ** 20, ld)
        self.assertIn("grid[1] = 131072 exceeds the limit of 65535", str(e.exception))


class SplitK(unittest.TestCase):
    """gemm with split_k (docs/kernels.md): the caller's workspace holds the splits' partials and
    the arrival counters, which every launch leaves zero; Python sees it as f32 elements."""

    def test_split_gemm_matches_python_and_leaves_counters_zero(self):
        gemm = build("split", '[bundle]\nname = "split"\ntargets = ["sm_90"]\n\n[[kernel]]\nname = "gemm_split"\n'
                     'template = "gemm"\noptions = { split_k = true, tile_m = 64, tile_n = 64 }\n').gemm_split
        self.assertTrue(gemm.signature.endswith("splits: u32, workspace: ptr.global read-write f32)"),
                        gemm.signature)
        m, n, k, splits = 70, 9, 40, 3  # two tiles along M, 5 K steps of 8 over 3 splits
        a = [random.uniform(-1, 1) for _ in range(m * k)]
        b = [random.uniform(-1, 1) for _ in range(k * n)]
        tiles = 2
        counters = tiles * 256
        workspace = truenort.DeviceArray.zeros([counters + tiles * splits * 64 * 64], "float32")
        results = []
        for _ in range(2):  # the same workspace twice: the counters must be back at zero
            c = truenort.DeviceArray.zeros([m * n], "float32")
            gemm(array(a), array(b), c, m, n, k, k, n, n, 1, 0, 0, 0, 1.0, 0.0, splits, workspace)
            results.append(struct.unpack("%df" % (m * n), c.to_bytes()))
            left = struct.unpack("%dI" % counters, workspace.to_bytes()[:4 * counters])
            self.assertEqual(left.count(0), counters)
        self.assertEqual(results[0], results[1])  # summed in split order: the same bits each time
        for i in range(m):
            for j in range(n):
                want = sum(a[i * k + kk] * b[kk * n + j] for kk in range(k))
                self.assertAlmostEqual(results[0][i * n + j], want, delta=1e-5)


def e4m3_value(code):
    """An E4M3 code's value from its fields (docs/kernels.md, "fp8 KV caches")."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return math.nan
    return sign * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


class Fp8(unittest.TestCase):
    """fp8 caches and weights from Python: their tensors are float8_e4m3fn (a DeviceArray of that
    dtype, or a DLPack export with its type code) or uint8 (a float8 tensor's uint8 view), the
    scales f32 numbers."""

    @classmethod
    def setUpClass(cls):
        cls.bundle = build("fp8", '[bundle]\nname = "fp8"\ntargets = ["sm_80", "sm_90"]\n\n'
                           '[[kernel]]\nname = "scatter"\ntemplate = "kv_scatter"\n'
                           'options = { dtype = "f32", cache_dtype = "fp8_e4m3" }\n\n'
                           '[[kernel]]\nname = "gemv"\ntemplate = "gemv"\noptions = { weight = "fp8_e4m3" }\n\n'
                           '[[kernel]]\nname = "gemm"\ntemplate = "gemm"\n'
                           'options = { dtype = "bf16", b_layout = "col", b_dtype = "fp8_e4m3", b_scales = true, '
                           'out_dtype = "f32" }\n\n'
                           '[[kernel]]\nname = "quantize"\ntemplate = "quantize_fp8"\noptions = { dtype = "f32" }\n')

    def test_kv_scatter_writes_the_codes_of_x_over_the_scale(self):
        scatter = self.bundle.scatter
        self.assertIn("k_cache: ptr.global write e4m3", scatter.signature)
        self.assertEqual(scatter.params[2]["element"], "e4m3")
        row, scale = 8, 0.5
        k = [1.0, -2.5, 0.0625, 224.0, 0.0, -0.0078125, 3.0, 1000.0]  # the last saturates to 448 (and its v)
        v = [x / 4 for x in k]
        k_cache = truenort.DeviceArray.zeros([3 * row], "float8_e4m3fn")
        v_cache = truenort.DeviceArray.zeros([3 * row], "uint8")
        positions = truenort.DeviceArray.from_bytes(struct.pack("I", 2), [1], "uint32")
        scatter(array(k), array(v), k_cache, v_cache, positions, 1, row, scale, scale)
        codes = k_cache.to_bytes()
        self.assertEqual(codes[:2 * row], bytes(2 * row))  # rows 0 and 1 untouched
        self.assertEqual([e4m3_value(c) * scale for c in codes[2 * row:]], k[:7] + [448 * scale])
        self.assertEqual([e4m3_value(c) * scale for c in v_cache.to_bytes()[2 * row:]], v[:7] + [448 * scale])
        with self.assertRaisesRegex(ValueError, r"the kernel's elements are float8_e4m3fn \(or their uint8 view\), "
                                                "the tensor is float32"):
            scatter(array(k), array(v), array([0.0] * 24), v_cache, positions, 1, row, scale, scale)
        # Codes of the other format are refused, from a DeviceArray and from DLPack.
        e5m2 = truenort.DeviceArray.zeros([3 * row], "float8_e5m2")
        with self.assertRaisesRegex(ValueError, r"argument 4 \('v_cache', ptr.global\): the kernel's elements are "
                                                r"float8_e4m3fn \(or their uint8 view\), the tensor is float8_e5m2"):
            scatter(array(k), array(v), k_cache, e5m2, positions, 1, row, scale, scale)
        with self.assertRaisesRegex(ValueError, "the tensor is float8_e5m2"):
            scatter(array(k), array(v), k_cache, FakeDlpack(v_cache, code=12, bits=8), positions, 1, row, scale, scale)

    def test_gemv_scales_the_codes_dot_products(self):
        m, k, scale = 5, 48, 0.25
        codes = bytes(random.choice([c for c in range(256) if not math.isnan(e4m3_value(c))]) for _ in range(m * k))
        x = [random.uniform(-1, 1) for _ in range(k)]
        y = truenort.DeviceArray.zeros([m], "float32")
        # A float8_e4m3fn tensor through DLPack (type code 10), as a framework exports one.
        w = truenort.DeviceArray.from_bytes(codes, [m * k], "uint8")
        self.bundle.gemv(FakeDlpack(w, code=10, bits=8), array(x), y, m, k, scale)
        got = struct.unpack("%df" % m, y.to_bytes())
        for i in range(m):
            want = scale * sum(e4m3_value(codes[i * k + j]) * x[j] for j in range(k))
            self.assertAlmostEqual(got[i], want, delta=1e-4 * (1 + abs(want)))


    def test_gemm_multiplies_by_the_codes_values_and_the_column_scales(self):
        gemm = self.bundle.gemm
        self.assertIn("b: ptr.global read e4m3", gemm.signature)
        self.assertEqual([p["name"] for p in gemm.params][:4], ["a", "b", "c", "b_scales"])
        # Small integers in A and codes of small values: every product and sum exact, so C is
        # exactly A B times the scales.
        m, n, k = 7, 9, 40
        a = [random.randint(-3, 3) for _ in range(m * k)]
        small = [c for c in range(256) if e4m3_value(c) in (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5)]
        codes = bytes(random.choice(small) for _ in range(n * k))  # B column-major: row j of codes is column j
        scales = [0.25 * (j + 1) for j in range(n)]
        bf16 = struct.pack("%dH" % len(a), *[struct.unpack("I", struct.pack("f", x))[0] >> 16 for x in a])
        c = truenort.DeviceArray.zeros([m * n], "float32")
        gemm(truenort.DeviceArray.from_bytes(bf16, [m * k], "bfloat16"), truenort.DeviceArray.from_bytes(codes, [n * k], "uint8"),
             c, array(scales), m, n, k, k, k, n, 1, 0, 0, 0, 1.0, 0.0)
        got = struct.unpack("%df" % (m * n), c.to_bytes())
        for i in range(m):
            for j in range(n):
                want = scales[j] * sum(a[i * k + kk] * e4m3_value(codes[j * k + kk]) for kk in range(k))
                self.assertEqual(got[i * n + j], want)


    def test_quantize_finds_row_scales_and_nearest_codes(self):
        rows, cols = 3, 7
        x = [[0.5, -3.0, 2.25, 0.001, -0.75, 1.0, 0.0], [0.0] * cols, [100.0, -448.0, 7.0, 1e-3, 0.3, -2.0, 5.5]]
        codes = truenort.DeviceArray.zeros([rows * cols], "uint8")
        scales = truenort.DeviceArray.zeros([rows], "float32")
        self.bundle.quantize(array([v for row in x for v in row]), codes, scales, rows, cols)
        got_scales = struct.unpack("%df" % rows, scales.to_bytes())
        got = codes.to_bytes()
        f32 = lambda v: struct.unpack("f", struct.pack("f", v))[0]  # noqa: E731
        finite = [c for c in range(256) if not math.isnan(e4m3_value(c))]
        for r in range(rows):
            scale = f32(max(abs(v) for v in x[r]) / 448)
            self.assertEqual(got_scales[r], scale)
            for c in range(cols):
                q = f32(x[r][c] / scale) if scale else x[r][c]
                # The nearest code (ties to the even one), the sign kept for zeros.
                want = min(finite, key=lambda k: (abs(e4m3_value(k) - q), k & 1, (k & 0x80) != (0x80 if q < 0 else 0)))
                self.assertEqual(got[r * cols + c], want, (r, c, q))


class W8A8(unittest.TestCase):
    """gemm over fp8 A and B (dtype fp8_e4m3): both tensors E4M3 codes, the per-token (a_scales)
    and per-channel (b_scales) scales f32 arrays; with mainloop = "auto" the simulated device
    (sm_90) runs the wgmma member of the sm_90a code."""

    def test_gemm_multiplies_the_codes_values_and_both_scales(self):
        gemm = build("w8a8", '[bundle]\nname = "w8a8"\ntargets = ["sm_89", "sm_90a"]\n\n[[kernel]]\nname = "gemm"\n'
                     'template = "gemm"\noptions = { dtype = "fp8_e4m3", b_layout = "col", a_scales = true, '
                     'b_scales = true, out_dtype = "f32", mainloop = "auto" }\n').gemm
        self.assertIn("a: ptr.global read e4m3", gemm.signature)
        self.assertIn("b: ptr.global read e4m3", gemm.signature)
        self.assertEqual([p["name"] for p in gemm.params][:5], ["a", "b", "c", "b_scales", "a_scales"])
        # Codes of small values and power-of-two scales: every product, sum and scaling exact.
        m, n, k = 9, 11, 48
        small = [c for c in range(256) if e4m3_value(c) in (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5)]
        a = bytes(random.choice(small) for _ in range(m * k))
        b = bytes(random.choice(small) for _ in range(n * k))  # B column-major: row j is column j
        a_scales = [2.0 ** (i % 3 - 1) for i in range(m)]
        b_scales = [2.0 ** -(j % 4) for j in range(n)]
        c = truenort.DeviceArray.zeros([m * n], "float32")
        gemm(truenort.DeviceArray.from_bytes(a, [m * k], "float8_e4m3fn"), truenort.DeviceArray.from_bytes(b, [n * k], "uint8"),
             c, array(b_scales), array(a_scales), m, n, k, k, k, n, 1, 0, 0, 0, 1.0, 0.0)
        got = struct.unpack("%df" % (m * n), c.to_bytes())
        for i in range(m):
            for j in range(n):
                want = a_scales[i] * b_scales[j] * sum(e4m3_value(a[i * k + kk]) * e4m3_value(b[j * k + kk])
                                                       for kk in range(k))
                self.assertEqual(got[i * n + j], want)


class MainloopAuto(unittest.TestCase):
    """gemm with mainloop = "auto" (docs/kernels.md): one kernel whose sm_90a code (the wgmma
    member) takes tensor maps and another launch rule than its sm_80 code; the simulated device
    (sm_90) selects the sm_90a code, and the kernel's launch rule is that code's."""

    def test_the_selected_code_has_its_own_launch_rule(self):
        gemm = build("auto", '[bundle]\nname = "autogemm"\ntargets = ["sm_80", "sm_90a"]\n\n[[kernel]]\nname = "gemm"\n'
                     'template = "gemm"\noptions = { dtype = "bf16", mainloop = "auto" }\n').gemm
        self.assertEqual(gemm.target, "sm_90a")
        self.assertEqual(gemm.launch_rule["block"], [384])  # the wgmma member's, not the mma.sync member's 256
        self.assertEqual(len(gemm.launch_rule["tensor_maps"]), 2)
        self.assertEqual([p["name"] for p in gemm.params], ["a", "b", "c", "m", "n", "k", "lda", "ldb", "ldc", "batch",
                                                             "stride_a", "stride_b", "stride_c", "alpha", "beta"])
        # Small integers are exact in bf16, and so are these sums: C = A B exactly, for each of 2
        # batches (the wgmma member reads them through its 3-D tensor maps).
        m, n, k, batch = 20, 24, 16, 2
        a = [random.randint(-2, 2) for _ in range(batch * m * k)]
        b = [random.randint(-2, 2) for _ in range(batch * k * n)]
        bf16 = lambda v: struct.pack("%dH" % len(v), *[struct.unpack("I", struct.pack("f", x))[0] >> 16 for x in v])
        c = truenort.DeviceArray.zeros([batch * m * n], "bfloat16")
        gemm(truenort.DeviceArray.from_bytes(bf16(a), [batch * m * k], "bfloat16"),
             truenort.DeviceArray.from_bytes(bf16(b), [batch * k * n], "bfloat16"), c, m, n, k, k, n, n, batch,
             m * k, k * n, m * n, 1.0, 0.0)
        got = [struct.unpack("f", struct.pack("I", h << 16))[0] for h in struct.unpack("%dH" % (batch * m * n), c.to_bytes())]
        want = [float(sum(a[z * m * k + i * k + kk] * b[z * k * n + kk * n + j] for kk in range(k)))
                for z in range(batch) for i in range(m) for j in range(n)]
        self.assertEqual(got, want)


class MixtureOfExperts(unittest.TestCase):
    """A mixture-of-experts layer's decode launches from Python: moe_route's u32 ids feed gemv's
    experts (a block row per (token, slot) pair), whose rows moe_combine weighs into the residual."""

    @classmethod
    def setUpClass(cls):
        cls.bundle = build("moe", '[bundle]\nname = "moe"\ntargets = ["sm_90"]\n\n'
                                  '[[kernel]]\nname = "route"\ntemplate = "moe_route"\noptions = { k = 2 }\n\n'
                                  '[[kernel]]\nname = "experts"\ntemplate = "gemv"\noptions = { experts = true }\n\n'
                                  '[[kernel]]\nname = "combine"\ntemplate = "moe_combine"\n'
                                  'options = { residual = true }\n')

    def test_a_layer_equals_its_definition(self):
        tokens, n_experts, k, m, slots = 3, 4, 16, 8, 2
        pairs = tokens * slots
        logits = [random.uniform(-2, 2) for _ in range(tokens * n_experts)]
        w = [random.uniform(-1, 1) for _ in range(n_experts * m * k)]
        x = [random.uniform(-1, 1) for _ in range(tokens * k)]
        residual = [random.uniform(-1, 1) for _ in range(tokens * m)]
        b = self.bundle
        self.assertEqual(b.experts.launch_rule["grid"], ["ceil_div(m, 8)", "pairs"])
        ids = truenort.DeviceArray.zeros([pairs], "uint32")
        weights = truenort.DeviceArray.zeros([pairs], "float32")
        b.route(array(logits), ids, weights, tokens, n_experts, 1.0)
        h = truenort.DeviceArray.zeros([pairs * m], "float32")
        b.experts(array(w), array(x), h, ids, m, k, n_experts, pairs, slots)
        y = truenort.DeviceArray.zeros([tokens * m], "float32")
        b.combine(h, weights, y, array(residual), tokens, m, slots)
        got_ids = struct.unpack("%dI" % pairs, ids.to_bytes())
        got_weights = struct.unpack("%df" % pairs, weights.to_bytes())
        got = struct.unpack("%df" % (tokens * m), y.to_bytes())
        for t in range(tokens):
            row = logits[t * n_experts:(t + 1) * n_experts]
            best = sorted(range(n_experts), key=lambda e: (-row[e], e))[:slots]
            self.assertEqual(list(got_ids[t * slots:(t + 1) * slots]), best)
            chosen = [math.exp(row[e] - max(row)) for e in best]
            for s in range(slots):
                self.assertAlmostEqual(got_weights[t * slots + s], chosen[s] / sum(chosen), places=5)
            for i in range(m):
                want = residual[t * m + i] + sum(
                    got_weights[t * slots + s] * sum(w[(best[s] * m + i) * k + j] * x[t * k + j] for j in range(k))
                    for s in range(slots))
                self.assertAlmostEqual(got[t * m + i], want, places=4)


class MixtureOfExpertsPrefill(unittest.TestCase):
    """A mixture-of-experts projection at prefill from Python: moe_align's tiles (with positions)
    order the pairs, embedding over pairs gathers their tokens' rows, gemm with experts multiplies
    each tile by its expert, and moe_combine reads each pair's row through positions."""

    @classmethod
    def setUpClass(cls):
        cls.bundle = build("moe_prefill", '[bundle]\nname = "moe_prefill"\ntargets = ["sm_90"]\n\n'
                                          '[[kernel]]\nname = "align"\ntemplate = "moe_align"\n'
                                          'options = { tile = 64, positions = true }\n\n'
                                          '[[kernel]]\nname = "gather"\ntemplate = "embedding"\n'
                                          'options = { pairs = true }\n\n'
                                          '[[kernel]]\nname = "experts"\ntemplate = "gemm"\n'
                                          'options = { dtype = "tf32", b_layout = "col", tile_m = 64, tile_n = 64, '
                                          'experts = true }\n\n'
                                          '[[kernel]]\nname = "combine"\ntemplate = "moe_combine"\n'
                                          'options = { positions = true }\n')

    def test_a_projection_equals_its_definition(self):
        tokens, n_experts, k, n, slots, tile = 40, 3, 16, 8, 2, 64
        pairs = tokens * slots
        ids = [random.randrange(n_experts) for _ in range(pairs)]
        weights = [random.uniform(0, 1) for _ in range(pairs)]
        w = [random.uniform(-1, 1) for _ in range(n_experts * n * k)]
        x = [random.uniform(-1, 1) for _ in range(tokens * k)]
        tiles = -(-pairs // tile) + min(n_experts + 1, pairs)
        b = self.bundle
        self.assertEqual(b.align.launch_rule["grid"], ["1"])
        sorted_pairs = truenort.DeviceArray.zeros([tiles * tile], "uint32")
        tile_experts = truenort.DeviceArray.zeros([tiles], "uint32")
        positions = truenort.DeviceArray.zeros([pairs], "uint32")
        b.align(truenort.DeviceArray.from_bytes(struct.pack("%dI" % pairs, *ids), [pairs], "uint32"),
                sorted_pairs, tile_experts, positions, pairs, n_experts)
        rows = tiles * tile
        a = truenort.DeviceArray.zeros([rows * k], "float32")
        b.gather(array(x), sorted_pairs, a, rows, tokens, k, slots)
        h = truenort.DeviceArray.zeros([rows * n], "float32")
        b.experts(a, array(w), h, tile_experts, rows, n, k, k, k, n, 1, 0, n * k, 0, n_experts, 1.0, 0.0)
        y = truenort.DeviceArray.zeros([tokens * n], "float32")
        b.combine(h, array(weights), positions, y, tokens, n, slots, rows)
        got_positions = struct.unpack("%dI" % pairs, positions.to_bytes())
        got_sorted = struct.unpack("%dI" % rows, sorted_pairs.to_bytes())
        got = struct.unpack("%df" % (tokens * n), y.to_bytes())
        for p in range(pairs):
            self.assertEqual(got_sorted[got_positions[p]], p)
        for t in range(tokens):
            for i in range(n):
                terms = [weights[t * slots + s] * w[(ids[t * slots + s] * n + i) * k + j] * x[t * k + j]
                         for s in range(slots) for j in range(k)]
                # tf32 rounds each input to 10 fraction bits: 2^-10 of each product, with margin.
                self.assertAlmostEqual(got[t * n + i], sum(terms), delta=2 ** -9 * sum(map(abs, terms)) + 1e-6)

if __name__ == "__main__":
    unittest.main()
