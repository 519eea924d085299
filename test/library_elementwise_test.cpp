// The elementwise and activation templates (kernels/Elementwise.cpp, spec
// test/library/elementwise.toml) against double references on the inputs as rounded to the
// storage type: every template and storage type at sizes that exercise the 16-byte path and the
// scalar tail, empty launches, misaligned buffers, other block sizes, and special values.
#include <cmath>
#include <limits>
#include <sstream>

#include "library_harness.h"

using namespace tn::libtest;

namespace {

constexpr Dtype kDtypes[] = {Dtype::F32, Dtype::BF16, Dtype::F16};
constexpr double kU = 0x1p-23;  // one f32 ulp, relative
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 7.0f;  // fills the output beyond n, which must stay untouched
constexpr uint32_t kTail = 9;

// What one template computes and how far its f32 math may be from exact.
struct Case {
  const char* kernel;               // spec kernels are <kernel>_<dtype>
  std::vector<const char*> inputs;  // tensor parameters read, in the reference's argument order
  bool inPlace = false;             // the output is inputs[0] (residual_add), else "y"
  bool alpha = false;               // takes the f32 scalar alpha
  double (*ref)(const double* v, double alpha);
  // Bound on the f32 math's error relative to the result, its final f32 rounding included
  // (in units of kU); the storage rounding of bf16/f16 comes on top.
  double (*ulps)(const double* v);
  float lo, hi;  // random inputs
};

double exactOp(const double*) { return 0.5; }  // one f32 rounding

const Case kAdd{"add", {"a", "b"}, false, false, [](const double* v, double) { return v[0] + v[1]; }, exactOp, -4, 4};
const Case kMul{"mul", {"a", "b"}, false, false, [](const double* v, double) { return v[0] * v[1]; }, exactOp, -4, 4};
const Case kScale{"scale", {"x"}, false, true, [](const double* v, double a) { return a * v[0]; }, exactOp, -4, 4};
const Case kResidual{"residual_add", {"y", "x"}, true, false, [](const double* v, double) { return v[0] + v[1]; },
                     exactOp, -4, 4};
const Case kRelu{"relu", {"x"}, false, false, [](const double* v, double) { return v[0] < 0 ? 0.0 : v[0]; },
                 [](const double*) { return 0.0; }, -4, 4};
const Case kSilu{"silu", {"x"}, false, false, [](const double* v, double) { return siluRef(v[0]); },
                 [](const double* v) { return siluUlps(v[0]); }, -12, 12};
const Case kSwiglu{"swiglu", {"gate", "up"}, false, false, [](const double* v, double) { return v[0] * siluRef(v[1]); },
                   [](const double* v) { return siluUlps(v[1]) + 0.5; }, -12, 12};
const Case kGeluTanh{"gelu_tanh", {"x"}, false, false, [](const double* v, double) { return geluTanhRef(v[0]); },
                     [](const double* v) { return geluTanhUlps(v[0]); }, -12, 12};
const Case kGeluErf{"gelu_erf", {"x"}, false, false, [](const double* v, double) { return geluErfRef(v[0]); },
                    [](const double* v) { return geluErfUlps(v[0]); }, -12, 12};
// GeGLU: swiglu with glu = "gelu" or "gelu_erf", gate * gelu(up), the product's rounding on top.
const Case kGeglu{"geglu", {"gate", "up"}, false, false, [](const double* v, double) { return v[0] * geluTanhRef(v[1]); },
                  [](const double* v) { return geluTanhUlps(v[1]) + 0.5; }, -12, 12};
const Case kGegluErf{"geglu_erf", {"gate", "up"}, false, false,
                     [](const double* v, double) { return v[0] * geluErfRef(v[1]); },
                     [](const double* v) { return geluErfUlps(v[1]) + 0.5; }, -12, 12};

// gpt-oss's clamped SwiGLU: swiglu with glu = "swiglu_oai", (clamp(gate) + 1) * up' sigmoid(1.702
// up') with up' = min(up, 7); the +1's and the product's roundings on top. Inputs out to ±12, past
// both clamps.
const Case kSwigluOai{"swiglu_oai", {"gate", "up"}, false, false,
                      [](const double* v, double) { return oaiLinearRef(v[0]) * oaiActRef(v[1]); },
                      [](const double* v) { return oaiActUlps(v[1]) + 1; }, -12, 12};

std::string kernelName(const Case& c, Dtype d) { return std::string(c.kernel) + "_" + dtypeName(d); }

// Results whose magnitude is below this may come out as zero: bf16/f16 cannot hold them (half
// of f16's smallest subnormal), or in f32 the exp of the sigmoid overflows first (x < -88.7).
double absFloor(Dtype d) { return d == Dtype::F16 ? 0x1p-25 : 0x1p-118; }

// Results from here up round to infinity in the storage type (its largest finite value plus
// half a step).
double overflow(Dtype d) {
  switch (d) {
    case Dtype::F32: return 0x1p128 * (1 - 0x1p-25);
    case Dtype::BF16: return 0x1p128 * (1 - 0x1p-9);
    case Dtype::F16: return 65520;
  }
  return HUGE_VAL;
}

// got[i] within tol[i] of want[i]; NaN must give NaN and infinities must match exactly.
void expectWithin(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tol,
                  const std::string& what) {
  REQUIRE(got.size() >= want.size());
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::abs(g - w) <= tol[i];
    if (!ok && bad++ < 4) first << " [" << i << "] got " << g << " want " << w << " tol " << tol[i] << ";";
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << want.size() << " outside tolerance:" << first.str());
}

struct Launch {
  std::string kernel;
  std::string misaligned = {};  // this buffer starts 4 bytes past an aligned address (GPU only)
  float alpha = 1.0f;
};

// Runs one launch on inputs (one vector per case input, n elements each) and checks every
// output element against the reference and that nothing past n was written.
void check(Runner& r, const Case& c, Dtype d, const Launch& l, const std::vector<std::vector<float>>& inputs) {
  const uint32_t n = static_cast<uint32_t>(inputs[0].size());
  std::vector<std::vector<float>> rounded;
  for (const auto& v : inputs) rounded.push_back(roundTo(d, v));
  Call call("elementwise", l.kernel);
  std::vector<float> y = c.inPlace ? rounded[0] : std::vector<float>(n, 0.0f);
  y.insert(y.end(), kTail, kSentinel);
  const std::string output = c.inPlace ? c.inputs[0] : "y";
  auto shift = [&](const std::string& name) { return name == l.misaligned ? 4u : 0u; };
  for (size_t i = c.inPlace ? 1 : 0; i < c.inputs.size(); ++i)
    call.buffer(c.inputs[i], encode(d, rounded[i]), shift(c.inputs[i]));
  call.buffer(output, encode(d, y), shift(output));
  call.scalar("n", n);
  if (c.alpha) call.scalar("alpha", l.alpha);
  Outputs o = r.run(call);
  std::vector<float> got = decode(d, o.get<std::byte>(output));
  REQUIRE(got.size() == n + kTail);

  std::vector<double> want(n), tol(n);
  double args[2];
  for (uint32_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < rounded.size(); ++k) args[k] = rounded[k][i];
    want[i] = c.ref(args, l.alpha);
    if (std::abs(want[i]) >= overflow(d)) want[i] = std::copysign(HUGE_VAL, want[i]);
    tol[i] = absFloor(d) + std::abs(want[i]) * (roundoff(d) + c.ulps(args) * kU);
  }
  std::string what = call.describe() + " (" + r.name() + ")";
  expectWithin(got, want, tol, what);
  for (uint32_t i = n; i < n + kTail; ++i)
    CHECK_MESSAGE(got[i] == kSentinel, what << ": element " << i << " past n was written");
}

std::vector<std::vector<float>> randomInputs(std::mt19937& rng, const Case& c, uint32_t n) {
  std::vector<std::vector<float>> v;
  for (size_t i = 0; i < c.inputs.size(); ++i) v.push_back(uniform(rng, n, c.lo, c.hi));
  return v;
}

// Every storage type at sizes around the vector width and the block (n = 0 launches nothing),
// then misaligned tensors one at a time (on the GPU; the interpreter binds aligned buffers).
void sweep(Runner& r, const Case& c, float alpha = 1.0f) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    const std::string kernel = kernelName(c, d);
    for (uint32_t n : {0u, 1u, 31u, 33u, 4097u, 9999u}) check(r, c, d, {kernel, {}, alpha}, randomInputs(rng, c, n));
    std::vector<std::string> buffers(c.inputs.begin(), c.inputs.end());
    if (!c.inPlace) buffers.push_back("y");
    for (const std::string& b : buffers) check(r, c, d, {kernel, b, alpha}, randomInputs(rng, c, 1031));
  }
}

// Special values: infinities, NaN, signed zeros for the arithmetic templates; in addition,
// inputs so large that exp overflows for the activations (their limits must come out, not NaN).
std::vector<float> specials(Dtype d, bool large) {
  std::vector<float> v = {0.0f, -0.0f, kNaN, kInf, -kInf, 1.5f, -3.0f, 1e-3f};
  if (large) {
    float big = d == Dtype::F16 ? 6e4f : 3e38f;
    for (float x : {20.0f, 50.0f, 88.0f, 89.0f, 100.0f, 1e4f, big}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  return v;
}

// Every value of the list, or for two inputs every pair with the large values (if any) only in
// the second, and no infinite gate: inf * silu(up) where silu(up) underflowed to 0 (up < -88.7
// in f32) is NaN, not the exact product's infinity. n is not a multiple of 8.
void specialValues(Runner& r, const Case& c, bool large, float alpha = -2.0f) {
  for (Dtype d : kDtypes) {
    std::vector<float> s = specials(d, large);
    std::vector<std::vector<float>> in(c.inputs.size());
    if (in.size() == 1) {
      in[0] = s;
    } else {
      for (float a : specials(d, false))
        for (float b : s) {
          if (large && std::isinf(a)) continue;
          in[0].push_back(a);
          in[1].push_back(b);
        }
    }
    check(r, c, d, {kernelName(c, d), {}, alpha}, in);
  }
}

}  // namespace

LIBRARY_TEST("elementwise add", elementwiseAdd) {
  sweep(r, kAdd);
  specialValues(r, kAdd, false);
}

LIBRARY_TEST("elementwise mul", elementwiseMul) {
  sweep(r, kMul);
  specialValues(r, kMul, false);
}

LIBRARY_TEST("elementwise scale", elementwiseScale) {
  sweep(r, kScale, -1.7f);
  specialValues(r, kScale, false, -2.0f);
}

LIBRARY_TEST("elementwise residual_add", elementwiseResidualAdd) {
  sweep(r, kResidual);
  specialValues(r, kResidual, false);
}

LIBRARY_TEST("elementwise relu", elementwiseRelu) {
  sweep(r, kRelu);
  specialValues(r, kRelu, true);
}

LIBRARY_TEST("elementwise silu", elementwiseSilu) {
  sweep(r, kSilu);
  specialValues(r, kSilu, true);
}

LIBRARY_TEST("elementwise swiglu", elementwiseSwiglu) {
  sweep(r, kSwiglu);
  specialValues(r, kSwiglu, true);
}

LIBRARY_TEST("elementwise swiglu with glu gelu and gelu_erf (GeGLU)", elementwiseGeglu) {
  for (const Case* c : {&kGeglu, &kGegluErf}) {
    sweep(r, *c);
    specialValues(r, *c, true);
  }
}

LIBRARY_TEST("elementwise swiglu with glu swiglu_oai (gpt-oss's clamped SwiGLU)", elementwiseSwigluOai) {
  sweep(r, kSwigluOai);
  specialValues(r, kSwigluOai, true);
}

LIBRARY_TEST("elementwise gelu tanh", elementwiseGeluTanh) {
  sweep(r, kGeluTanh);
  specialValues(r, kGeluTanh, true);
}

LIBRARY_TEST("elementwise gelu erf", elementwiseGeluErf) {
  sweep(r, kGeluErf);
  specialValues(r, kGeluErf, true);
}

// swiglu with rows = true: gate and up as rows ld elements apart (the halves of a fused
// gate-and-up output, ld = 2 cols, among others), y contiguous, equal byte for byte to the flat
// kernel on the rows packed together: the vector path (cols and ld multiples of the vector),
// the element path (either not), one column, a gap past each row filled with values that would
// show if read, and 32-thread blocks.
LIBRARY_TEST("elementwise swiglu with rows: strided gate and up", elementwiseSwigluRows) {
  struct Form {
    const char* rows;
    const char* flat;
    Dtype d;
  };
  std::mt19937 rng(seed());
  for (const Form& f : {Form{"swiglu_rows_bf16", "swiglu_bf16", Dtype::BF16}, Form{"geglu_rows_f32", "geglu_f32", Dtype::F32},
                        Form{"swiglu_rows_f16_block32", "swiglu_f16", Dtype::F16}})
    for (uint32_t cols : {1u, 8u, 100u, 1312u})
      for (uint32_t ld : {cols, 2 * cols, cols + 37}) {
        const uint32_t rows = 5;
        const size_t span = size_t(rows - 1) * ld + cols;
        std::vector<float> gate = roundTo(f.d, uniform(rng, size_t(rows) * cols, -4.0f, 4.0f));
        std::vector<float> up = roundTo(f.d, uniform(rng, size_t(rows) * cols, -4.0f, 4.0f));
        std::vector<float> gateLd(span, 3.0e4f), upLd(span, 3.0e4f);
        for (uint32_t r0 = 0; r0 < rows; ++r0)
          for (uint32_t c = 0; c < cols; ++c) {
            gateLd[size_t(r0) * ld + c] = gate[size_t(r0) * cols + c];
            upLd[size_t(r0) * ld + c] = up[size_t(r0) * cols + c];
          }
        const std::vector<float> y(size_t(rows) * cols, kSentinel);
        std::vector<std::byte> strided = r.run(Call("elementwise", f.rows)
                                                   .buffer("gate", encode(f.d, gateLd))
                                                   .buffer("up", encode(f.d, upLd))
                                                   .buffer("y", encode(f.d, y))
                                                   .scalar("rows", rows)
                                                   .scalar("cols", cols)
                                                   .scalar("ld", ld))
                                             .get<std::byte>("y");
        std::vector<std::byte> flat = r.run(Call("elementwise", f.flat)
                                                .buffer("gate", encode(f.d, gate))
                                                .buffer("up", encode(f.d, up))
                                                .buffer("y", encode(f.d, y))
                                                .scalar("n", rows * cols))
                                          .get<std::byte>("y");
        CHECK_MESSAGE(strided == flat, f.rows << " cols " << cols << " ld " << ld << ": differs from " << f.flat);
        CHECK_MESSAGE(flat != encode(f.d, y), f.flat << " wrote nothing");
      }
}

// The block option changes the launch rule and the thread-to-element map.
LIBRARY_TEST("elementwise other block sizes", elementwiseBlocks) {
  std::mt19937 rng(seed());
  for (uint32_t n : {33u, 4097u, 9999u}) {
    check(r, kAdd, Dtype::F32, {"add_f32_block32"}, randomInputs(rng, kAdd, n));
    check(r, kSwiglu, Dtype::BF16, {"swiglu_bf16_block1024"}, randomInputs(rng, kSwiglu, n));
  }
}
