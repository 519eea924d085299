// Decodes an IR kernel into the interpreter's compact program: one register slot range per
// value, constants folded into the initial register file, one Code per executed instruction with
// its lane loop picked by type, branch edges with their block-argument moves, the shared-memory
// layout and the immediate post-dominator of every block (where divergent warps reconverge).
// The decoder re-checks the operand types it relies on so that malformed IR is an error, never
// an out-of-range register access.
#include <algorithm>

#include "backends/interp/InterpImpl.h"
#include "ir/Dominance.h"
#include "passes/Analysis.h"

namespace tn::interp::detail {

namespace {

using ir::BlockId;
using ir::Inst;
using ir::Kernel;
using ir::Op;
using ir::Type;
using ir::ValueId;

// A tmap value is one slot: the index of its map in the launch's table.
uint32_t slotsOf(Type t) { return t.scalar == ir::Scalar::TensorMap ? 1 : std::max(1u, (t.bytes() + 7) / 8); }

uint64_t alignUp(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

class Decoder {
 public:
  Decoder(const ir::Module& m, const Kernel& k, Program& p) : m_(m), k_(k), p_(p) {}

  std::optional<Error> run() {
    p_.kernel = k_.name;
    p_.files = m_.files;
    p_.reqntid = k_.reqntid;
    p_.tables = k_.tables;
    p_.maxntid = k_.maxntid;
    p_.locs.resize(k_.insts.size());
    p_.ops.resize(k_.insts.size());
    for (size_t i = 0; i < k_.insts.size(); ++i) {
      p_.locs[i] = k_.insts[i].loc;
      p_.ops[i] = k_.insts[i].op;
    }
    if (k_.blocks.empty()) return fail(k_.loc, "kernel has no blocks");

    slot_.resize(k_.values.size());
    for (size_t v = 0; v < k_.values.size(); ++v) {
      slot_[v] = p_.slots;
      p_.slots += slotsOf(k_.values[v].type);
    }
    for (const ir::KernelParam& kp : k_.params) {
      Type t = k_.typeOf(kp.value);
      const std::string& name = k_.value(kp.value).name;
      bool hostPtr = t.isPtr() && (t.space == ir::AddrSpace::Global || t.space == ir::AddrSpace::Generic);
      if (t.isPtr() && !hostPtr)
        return fail(k_.loc, "parameter '%" + name + "' of type " + ir::typeName(t) + " cannot be bound to host memory");
      p_.params.push_back({name, t, slot_[kp.value.index], slotsOf(t)});
    }
    if (auto e = layoutShared()) return e;
    traceSharedOrigins();
    traceGlobalWrites();
    markWgmmaSlots();

    p_.blockStart.resize(k_.blocks.size());
    for (uint32_t b = 0; b < k_.blocks.size(); ++b) {
      const ir::Block& blk = k_.blocks[b];
      p_.blockStart[b] = static_cast<uint32_t>(p_.code.size());
      if (blk.insts.empty() || !k_.terminator(BlockId(b)))
        return fail(blk.loc, "block '^" + blk.name + "' does not end in a terminator");
      for (size_t i = 0; i < blk.insts.size(); ++i) {
        const Inst& in = k_.inst(blk.insts[i]);
        if (ir::hasFlag(in.op, ir::OF_TERMINATOR) != (i + 1 == blk.insts.size()))
          return fail(in.loc, "terminator '" + std::string(ir::info(in.op).name) + "' in the middle of block '^" +
                                  blk.name + "'");
        if (auto e = decodeInst(blk.insts[i], b)) return e;
      }
    }
    for (Code& c : p_.code)
      for (Edge& e : c.edge) e.pc = p_.blockStart[e.block];
    ir::DominatorTree cfg(k_);
    reconvergence(cfg);
    markSyncReach(cfg);
    return std::nullopt;
  }

 private:
  Error fail(ir::SourceLoc loc, const std::string& msg) const {
    Error e;
    e.kind = ErrorKind::Setup;
    e.diag = {ir::Severity::Error, m_.fileName(loc), loc, "cannot interpret kernel '" + k_.name + "': " + msg};
    return e;
  }

  // The immediate post-dominator of every block, over the CFG extended by a virtual exit that
  // every `ret` block jumps to. Blocks that cannot reach a `ret` (endless loops) are left out of
  // the tree, so they reconverge only at that exit, and a branch between such a loop and a path
  // to `ret` reconverges where that path would (docs/interpreter.md).
  void reconvergence(const ir::DominatorTree& cfg) {
    passes::PostDominatorTree pdom(k_, cfg, passes::EndlessLoops::LeaveOut);
    p_.ipdom.assign(k_.blocks.size(), kExitBlock);
    for (uint32_t b = 0; b < k_.blocks.size(); ++b)
      if (BlockId r = pdom.ipdom(BlockId(b)); r.valid()) p_.ipdom[b] = r.index;
  }

  // Blocks from which some path executes bar.sync or a warp collective (an OF_CONVERGENT op:
  // shfl.sync, vote.sync, mma, ldmatrix, elect.sync, setmaxnreg, wgmma.*). At a divergent branch
  // the engine runs a path that cannot reach one of them first, so threads that return early have
  // exited by the time the others synchronize, and the report names them as exited.
  void markSyncReach(const ir::DominatorTree& cfg) {
    const size_t n = k_.blocks.size();
    std::vector<BlockId> work;
    p_.reachesSync.assign(n, 0);
    for (uint32_t b = 0; b < n; ++b)
      for (ir::InstId id : k_.blocks[b].insts) {
        const Inst& in = k_.inst(id);
        if (ir::hasFlag(in.op, ir::OF_CONVERGENT) && !p_.reachesSync[b]) {
          p_.reachesSync[b] = 1;
          work.push_back(BlockId(b));
        }
      }
    while (!work.empty()) {
      BlockId b = work.back();
      work.pop_back();
      for (BlockId p : cfg.predecessors(b))
        if (!p_.reachesSync[p.index]) {
          p_.reachesSync[p.index] = 1;
          work.push_back(p);
        }
    }
  }

  std::optional<Error> layoutShared() {
    uint64_t end = 0;
    unsigned dynAlign = 16;
    for (const ir::SharedDecl& d : k_.shared) {
      if (d.dynamic) {
        dynAlign = std::max(dynAlign, d.align);
        continue;
      }
      end = alignUp(end, d.align);
      p_.shared.push_back({d.name, static_cast<uint32_t>(end), d.bytes(), false});
      end += d.bytes();
      if (end > (uint64_t{1} << 31)) return fail(d.loc, "static shared memory exceeds 2 GiB");
    }
    p_.staticSharedEnd = static_cast<uint32_t>(end);
    p_.dynamicSharedStart = static_cast<uint32_t>(alignUp(end, dynAlign));
    for (const ir::SharedDecl& d : k_.shared)
      if (d.dynamic) p_.shared.push_back({d.name, p_.dynamicSharedStart, 0, true});
    return std::nullopt;
  }

  // The origin of every value of a type `tracked` accepts, when the IR says it for every path: a
  // forward data-flow over the SSA values to a fixed point in a lattice of origins V, joined by
  // `meet` (for which `start`'s unset state is the identity and `mixed` the top). `start(v)` is a
  // value's state before any definition is seen (unset, or a kernel parameter's own origin);
  // `transfer(in, of)` the origin an instruction gives its result from its operands' (`of(i)`).
  // Block arguments meet into their parameters.
  template <class V, class Tracked, class Start, class Transfer, class Meet>
  std::vector<V> traceOrigins(V mixed, Tracked tracked, Start start, Transfer transfer, Meet meet) const {
    std::vector<V> origin(k_.values.size(), mixed);
    bool any = false;
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (tracked(k_.values[v].type)) {
        origin[v] = start(v);
        any = true;
      }
    if (!any) return origin;
    bool changed = true;
    auto update = [&](ValueId v, V o) {
      if (v.index >= origin.size() || origin[v.index] == mixed) return;
      V next = meet(origin[v.index], o);
      if (next != origin[v.index]) {
        origin[v.index] = next;
        changed = true;
      }
    };
    while (changed) {
      changed = false;
      for (const ir::Block& blk : k_.blocks)
        for (ir::InstId id : blk.insts) {
          const Inst& in = k_.inst(id);
          for (const ir::BlockCall& call : in.succs) {
            if (call.block.index >= k_.blocks.size()) continue;
            const ir::Block& to = k_.blocks[call.block.index];
            for (size_t a = 0; a < call.args.size() && a < to.params.size(); ++a)
              if (call.args[a].index < origin.size()) update(to.params[a], origin[call.args[a].index]);
          }
          if (!in.result || in.result.index >= origin.size() || origin[in.result.index] == mixed) continue;
          auto of = [&](size_t operand) {
            return operand < in.operands.size() && in.operands[operand].index < origin.size()
                       ? origin[in.operands[operand].index]
                       : mixed;
          };
          update(in.result, transfer(in, of));
        }
    }
    return origin;
  }

  // Program::sharedOrigin: which array each ptr.shared value points into, through ptradd, selp
  // and bitcast (shared.addr creates them; a parameter never is one; -2 unset, -1 several arrays
  // or an address from elsewhere: an integer, a load). (The verifier lets no bitcast widen a
  // ptr.shared into a generic pointer.)
  void traceSharedOrigins() {
    constexpr int32_t kUnset = -2, kMixed = -1;
    const Type shared = Type::ptr(ir::AddrSpace::Shared);
    auto tracked = [&](std::optional<Type> t) { return t && *t == shared; };
    auto meet = [](int32_t a, int32_t b) { return a == kUnset ? b : b == kUnset || a == b ? a : kMixed; };
    std::vector<int32_t> origin = traceOrigins(
        kMixed, tracked, [&](size_t v) { return k_.values[v].kind == ir::DefKind::KernelParam ? kMixed : kUnset; },
        [&](const Inst& in, auto&& of) {
          switch (in.op) {
            case Op::SharedAddr: return sharedIndex(in.symbol);
            case Op::PtrAdd: return of(0);
            case Op::Selp: return meet(of(0), of(1));
            case Op::Bitcast: return tracked(in.srcType) ? of(0) : kMixed;
            default: return kMixed;
          }
        },
        meet);
    p_.sharedOrigin.assign(p_.slots, kMixed);
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (origin[v] >= 0) p_.sharedOrigin[slot_[v]] = origin[v];
  }

  // Program::paramWritten and writesAnywhere: which pointer parameters the kernel's plain global
  // stores may write through. A global or generic pointer's origin is the set of parameters it
  // may derive from (one bit each; the empty set: unset), through ptradd, selp, bitcast and
  // 64-bit integers (a pointer's bits masked to an alignment, offset, cast back): an integer
  // from no pointer is kNone, and adding, subtracting or masking it keeps the other operand's
  // origin. kShared: a generic pointer made from a ptr.shared, no global memory. kUnknown: a
  // pointer cast from an integer of no pointer (or a loaded one), the sum of two pointers, a
  // parameter beyond the first 60; a store through it may write anything.
  void traceGlobalWrites() {
    constexpr uint64_t kShared = uint64_t{1} << 60, kNone = uint64_t{1} << 61, kUnknown = uint64_t{1} << 62;
    constexpr unsigned kParamBits = 60;
    auto pointer = [](Type t) {
      return t.isPtr() && (t.space == ir::AddrSpace::Global || t.space == ir::AddrSpace::Generic);
    };
    auto wide = [](Type t) { return (t.isInt() || t.isBits()) && !t.isVector() && t.bits() == 64; };
    std::vector<uint64_t> paramBit(k_.values.size(), kUnknown);
    for (size_t i = 0; i < k_.params.size() && i < kParamBits; ++i)
      if (k_.params[i].value.index < paramBit.size()) paramBit[k_.params[i].value.index] = uint64_t{1} << i;
    // A pointer made from `o`: an integer of no pointer points anywhere.
    auto asPointer = [&](uint64_t o) { return o & kNone ? (o & ~kNone) | kUnknown : o; };
    std::vector<uint64_t> origin = traceOrigins(
        kUnknown, [&](std::optional<Type> t) { return t && (pointer(*t) || wide(*t)); },
        [&](size_t v) -> uint64_t {
          if (k_.values[v].kind != ir::DefKind::KernelParam) return 0;
          return pointer(k_.values[v].type) ? paramBit[v] : kNone;
        },
        [&](const Inst& in, auto&& of) -> uint64_t {
          const Type t = k_.typeOf(in.result);
          auto sum = [&](uint64_t a, uint64_t b) -> uint64_t {  // a pointer's bits plus an integer
            if (!a || !b) return 0;                              // wait for both
            uint64_t pa = a & ~kNone, pb = b & ~kNone;
            return pa && pb ? kUnknown : pa | pb ? pa | pb : kNone;
          };
          switch (in.op) {
            case Op::PtrAdd: return of(0);
            case Op::Selp: return of(0) | of(1);
            case Op::Bitcast:
              if (in.srcType && *in.srcType == Type::ptr(ir::AddrSpace::Shared)) return kShared;
              if (!in.srcType || !(pointer(*in.srcType) || wide(*in.srcType))) return pointer(t) ? kUnknown : kNone;
              return pointer(t) ? asPointer(of(0)) : of(0);
            case Op::Add: case Op::Sub: case Op::And: case Op::Or:
              return wide(t) ? sum(of(0), of(1)) : kUnknown;
            case Op::Mad:  // a product of integers plus a pointer's bits
              if (!wide(t)) return kUnknown;
              if (!of(0) || !of(1)) return 0;
              return of(0) == kNone && of(1) == kNone ? sum(kNone, of(2)) : kUnknown;
            default: return wide(t) ? kNone : kUnknown;  // a constant, a load, a conversion: no pointer
          }
        },
        [](uint64_t a, uint64_t b) { return a | b; });
    p_.paramWritten.assign(k_.params.size(), 0);
    for (const Inst& in : k_.insts) {
      if (in.op != Op::St || in.operands.empty() || in.operands[0].index >= origin.size() ||
          !pointer(k_.typeOf(in.operands[0])))
        continue;
      uint64_t o = asPointer(origin[in.operands[0].index]);
      if (o & kUnknown) p_.writesAnywhere = true;
      for (unsigned i = 0; i < kParamBits && i < k_.params.size(); ++i)
        if (o >> i & 1) p_.paramWritten[i] = 1;
    }
  }

  // The index in Program::shared of the array a shared.addr names; -1 for none.
  int32_t sharedIndex(int32_t symbol) const {
    if (symbol < 0 || static_cast<size_t>(symbol) >= k_.shared.size()) return -1;
    for (size_t a = 0; a < p_.shared.size(); ++a)
      if (p_.shared[a].name == k_.shared[symbol].name) return static_cast<int32_t>(a);
    return -1;
  }

  uint32_t sharedStart(int32_t symbol) const {
    int32_t a = sharedIndex(symbol);
    return a < 0 ? 0 : p_.shared[a].start;
  }

  // The operand types the table's letters demand (see ir/Ops.def).
  std::optional<std::string> checkTypes(const Inst& in) const {
    const ir::OpInfo& oi = ir::info(in.op);
    std::string name(oi.name);
    if (oi.types != ir::TC_NONE && (!in.type || !ir::typeInClasses(*in.type, oi.types)))
      return "'" + name + "' does not take type " + (in.type ? ir::typeName(*in.type) : std::string("(none)"));
    if ((oi.flags & ir::OF_SRCTYPE) && !in.srcType) return "'" + name + "' needs a source type";
    bool variadic = oi.flags & ir::OF_VARIADIC;
    if (variadic ? in.operands.size() != in.type->lanes : !ir::operandCountFits(oi, in.operands.size()))
      return "'" + name + "' has " + std::to_string(in.operands.size()) + " operands";
    for (size_t i = 0; i < in.operands.size(); ++i) {
      if (in.operands[i].index >= k_.values.size()) return "'" + name + "' uses an undefined value";
      Type t = k_.typeOf(in.operands[i]);
      char letter = variadic ? '*' : oi.operands[i];
      bool ok = false;
      std::string want;
      switch (letter) {
        case 'T': ok = t == *in.type; want = ir::typeName(*in.type); break;
        case 'S': ok = t == *in.srcType; want = ir::typeName(*in.srcType); break;
        case 'p': ok = t.isPred(); want = "pred"; break;
        case 'i': ok = (t.isInt() || t.isBits()) && !t.isVector() && t.bits() == 32; want = "a 32-bit integer"; break;
        case 'P': ok = t.isPtr(); want = "a pointer"; break;
        case 'M': ok = t.scalar == ir::Scalar::TensorMap; want = "tmap"; break;
        case 'o':
          ok = (t.isInt() || t.isBits()) && !t.isVector() && t.bits() == in.type->bits();
          want = "a " + std::to_string(in.type->bits()) + "-bit integer";
          break;
        case '*': ok = t == in.type->element(); want = ir::typeName(in.type->element()); break;
        case 'a': ok = t == ir::kMmaAFragment; want = ir::typeName(ir::kMmaAFragment); break;
        case 'b': ok = t == ir::kMmaBFragment; want = ir::typeName(ir::kMmaBFragment); break;
        case 'F': ok = t == ir::mmaAccFragment(in.type->scalar); want = ir::typeName(ir::mmaAccFragment(in.type->scalar)); break;
        case 'G': ok = t == *in.type; want = ir::typeName(*in.type); break;
        case 'A': ok = t == Type::of(ir::Scalar::B64) || t == ir::kMmaAFragment; want = "b64 or v4.b32"; break;
        case 'd': ok = t == Type::of(ir::Scalar::B64); want = "b64"; break;
        default: break;
      }
      if (!ok)
        return "operand " + std::to_string(i + 1) + " of '" + name + "' has type " + ir::typeName(t) + ", expected " +
               want;
    }
    if (in.op == Op::Extract && in.imm >= in.type->lanes) return "'extract' lane " + std::to_string(in.imm) + " out of range";
    if (in.op == Op::VoteSync) {
      bool ballot = in.mod(ir::ModGroup::Vote) == ir::Mod::Ballot;
      if (ballot == in.type->isPred()) return ballot ? "vote.sync.ballot produces b32" : "this vote.sync produces pred";
    }
    if (in.op == Op::Mma && !ir::mmaFormExists(in.mod(ir::ModGroup::Shape), in.srcType->scalar, *in.type, in.mod(ir::ModGroup::Fp8)))
      return "'mma' has no form " + ir::typeName(*in.srcType) + " -> " + ir::typeName(*in.type);
    if (in.op == Op::Ldmatrix && (in.type->scalar != ir::Scalar::B32 ||
                                  k_.typeOf(in.operands[0]).space != ir::AddrSpace::Shared))
      return "'ldmatrix' yields b32, v2.b32 or v4.b32 through a shared pointer";
    if (in.op == Op::CvtPack && (in.srcType->scalar != ir::Scalar::F32 || in.type->isVector() ||
                                 (in.type->scalar != ir::Scalar::F16 && in.type->scalar != ir::Scalar::BF16)))
      return "'cvt.pack' converts f32 to f16 or bf16";
    if (in.op == Op::Bitcast) {
      Type s = *in.srcType, t = *in.type;
      if (!(s.isPtr() && t.isPtr()) && s.bytes() != t.bytes())
        return "bitcast between types of different sizes (" + ir::typeName(s) + " -> " + ir::typeName(t) + ")";
    }
    return std::nullopt;
  }

  std::optional<Error> decodeInst(ir::InstId id, uint32_t block) {
    const Inst& in = k_.inst(id);
    if (auto why = checkTypes(in)) return fail(in.loc, *why);
    Code c;
    c.op = in.op;
    c.inst = id.index;
    c.block = block;
    if (in.type) {
      c.scalar = in.type->scalar;
      c.lanes = in.type->lanes;
      c.space = in.type->space;
    }
    if (in.srcType) {
      c.srcScalar = in.srcType->scalar;
      c.srcSpace = in.srcType->space;
    }
    c.round = in.mod(ir::ModGroup::Round);
    c.ftz = in.has(ir::Mod::FtzMod);
    c.sat = in.has(ir::Mod::SatMod);
    for (ir::ModGroup g : {ir::ModGroup::Cmp, ir::ModGroup::Dim, ir::ModGroup::Shfl, ir::ModGroup::Vote,
                           ir::ModGroup::AtomOp, ir::ModGroup::Shape, ir::ModGroup::Trans, ir::ModGroup::Prmt,
                           ir::ModGroup::Fp8})
      if (in.mod(g) != ir::Mod::None) c.mode = in.mod(g);
    c.modeB = ir::fp8FormatOfB(in);
    if (in.result) c.dst = slot_[in.result.index];
    for (size_t i = 0; i < in.operands.size() && i < std::size(c.src); ++i) c.src[i] = slot_[in.operands[i].index];
    c.nsrc = static_cast<uint8_t>(std::min<size_t>(in.operands.size(), std::size(c.src)));
    c.imm = in.imm;
    c.wgWrite = in.result && !p_.wgSlot.empty() && (p_.wgSlot[c.dst] & kWgOperand) && in.op != Op::WgmmaMma;

    switch (in.op) {
      case Op::Const:
        p_.constants.push_back({c.dst, in.imm});
        return std::nullopt;
      case Op::SharedAddr:
        if (in.symbol < 0 || static_cast<size_t>(in.symbol) >= k_.shared.size()) return fail(in.loc, "unknown shared array");
        p_.constants.push_back({c.dst, sharedStart(in.symbol)});
        return std::nullopt;
      case Op::Tid: case Op::Ntid: case Op::Ctaid: case Op::Nctaid: case Op::Laneid: case Op::Warpid:
        c.kind = Kind::Special;
        break;
      case Op::TableLd:
        if (in.symbol < 0 || static_cast<size_t>(in.symbol) >= k_.tables.size()) return fail(in.loc, "unknown table");
        c.kind = Kind::Table;
        c.imm = static_cast<uint64_t>(in.symbol);
        break;
      case Op::Ld: case Op::St: case Op::Atom: case Op::AtomCas:
        c.kind = in.op == Op::Ld ? Kind::Ld : in.op == Op::St ? Kind::St : Kind::Atom;
        c.space = k_.typeOf(in.operands[0]).space;
        c.bytes = static_cast<uint8_t>(in.type->bytes());
        c.isVolatile = in.has(ir::Mod::VolatileMod);
        c.nc = in.has(ir::Mod::NcMod);
        if (std::string why; in.op == Op::Atom && !validAtom(c, why)) return fail(in.loc, why);
        break;
      case Op::Membar:
        c.kind = Kind::Nop;
        break;
      // Asynchronous copies: the engine keeps them pending per thread until a wait lands them.
      case Op::CpAsync:
        c.kind = Kind::AsyncCopy;
        c.space = ir::AddrSpace::Shared;
        c.bytes = static_cast<uint8_t>(in.imm);
        c.srcSize = in.operands.size() == 3;
        if ((in.imm != 4 && in.imm != 8 && in.imm != 16) || k_.typeOf(in.operands[0]) != Type::ptr(ir::AddrSpace::Shared) ||
            k_.typeOf(in.operands[1]) != Type::ptr(ir::AddrSpace::Global))
          return fail(in.loc, "cp.async copies 4, 8 or 16 bytes from a ptr.global to a ptr.shared");
        p_.asyncCopies = true;
        break;
      // Groups are counted per thread even in a kernel whose copies are all elsewhere (or none).
      case Op::CpAsyncCommit:
        c.kind = Kind::AsyncCommit;
        p_.asyncCopies = true;
        break;
      case Op::CpAsyncWait:
      case Op::CpAsyncWaitAll:
        c.kind = Kind::AsyncWait;
        p_.asyncCopies = true;
        break;
      case Op::BarSync:
        c.kind = Kind::Bar;
        break;
      case Op::BarNamedSync: case Op::BarNamedArrive:
        c.kind = Kind::NamedBar;
        p_.namedBarriers = true;
        break;
      case Op::MbarInit: case Op::MbarArrive: case Op::MbarArriveTx:
        c.kind = Kind::Mbarrier;
        c.space = ir::AddrSpace::Shared;
        c.bytes = 8;
        break;
      case Op::MbarTryWait:
        c.kind = Kind::MbarWait;
        c.space = ir::AddrSpace::Shared;
        c.bytes = 8;
        break;
      case Op::ElectSync:
        c.kind = Kind::Elect;
        break;
      case Op::SetMaxNRegInc: case Op::SetMaxNRegDec:  // the 4 warps together; registers are not a resource here
        c.kind = Kind::Warpgroup;
        break;
      case Op::WgmmaMma:
        if (in.imm < 8 || in.imm > 256 || in.imm % 8 || *in.type != Type::of(ir::Scalar::F32, uint8_t(in.imm / 2)) ||
            (in.mod(ir::ModGroup::Fp8) != ir::Mod::None
                 ? in.srcType->scalar != ir::Scalar::B8 || in.has(ir::Mod::TransAMod) || in.has(ir::Mod::TransBMod) ||
                       k_.typeOf(in.operands[1]).isVector()
                 : in.srcType->scalar != ir::Scalar::BF16 && in.srcType->scalar != ir::Scalar::F16))
          return fail(in.loc, "'wgmma.mma_async' multiplies bf16 or f16 (or fp8 codes, K-major, A by descriptor) at "
                              "N = 8 .. 256 into a v(N/2).f32 accumulator");
        c.wgmma = static_cast<uint8_t>((in.has(ir::Mod::TransAMod) ? kWgTransA : 0) |
                                       (in.has(ir::Mod::TransBMod) ? kWgTransB : 0) |
                                       (k_.typeOf(in.operands[1]).isVector() ? kWgRegA : 0));
        if ((c.wgmma & kWgRegA) && (c.wgmma & kWgTransA))
          return fail(in.loc, "'wgmma.mma_async' reads A from registers, which cannot be transposed");
        [[fallthrough]];
      case Op::WgmmaFence: case Op::WgmmaCommit: case Op::WgmmaWait:
        c.kind = Kind::Warpgroup;
        c.space = ir::AddrSpace::Shared;
        break;
      case Op::Pack:
        if (in.type->lanes > 4) {  // a wide f32 vector: one two-lane pack per 64-bit slot
          c.kind = Kind::Compute;
          c.lanes = 2;
          c.nsrc = 2;
          std::string why;
          c.fn = selectCompute(c, why);
          if (!c.fn) return fail(in.loc, why);
          for (uint32_t s = 0; s < in.type->lanes / 2u; ++s) {
            c.dst = slot_[in.result.index] + s;
            c.src[0] = slot_[in.operands[2 * s].index];
            c.src[1] = slot_[in.operands[2 * s + 1].index];
            p_.code.push_back(c);
          }
          return std::nullopt;
        }
        c.kind = Kind::Compute;
        if (std::string why; !(c.fn = selectCompute(c, why))) return fail(in.loc, why);
        break;
      case Op::FenceProxyAsync:
        c.kind = Kind::ProxyFence;
        break;
      // TMA: copies at issue, checked against the mbarrier phase or bulk group that covers them.
      case Op::TmaLoad: case Op::TmaStore: case Op::TmaLoad3d: case Op::TmaStore3d: {
        const bool load = in.op == Op::TmaLoad || in.op == Op::TmaLoad3d;
        const size_t rank = in.op == Op::TmaLoad || in.op == Op::TmaStore ? 2 : 3;
        c.kind = load ? Kind::TmaLoad : Kind::TmaStore;
        c.space = ir::AddrSpace::Shared;
        const Type shared = Type::ptr(ir::AddrSpace::Shared);
        bool ok = load ? k_.typeOf(in.operands[0]) == shared && k_.typeOf(in.operands[2 + rank]) == shared
                       : k_.typeOf(in.operands[1 + rank]) == shared;
        if (!ok) return fail(in.loc, std::string(ir::info(in.op).name) + " takes ptr.shared addresses");
        // Its register holds the launch's index of the map, which only a kernel parameter gets.
        if (k_.value(in.operands[load ? 1 : 0]).kind != ir::DefKind::KernelParam)
          return fail(in.loc, std::string(ir::info(in.op).name) + "'s tensor map is not a kernel parameter");
        (load ? p_.tmaLoads : p_.bulkStores) = true;
        break;
      }
      case Op::BulkCommit: case Op::BulkWaitRead:
        c.kind = in.op == Op::BulkCommit ? Kind::BulkCommit : Kind::BulkWait;
        p_.bulkStores = true;
        break;
      case Op::ShflSync:
        c.kind = Kind::Shfl;
        break;
      case Op::VoteSync:
        c.kind = Kind::Vote;
        break;
      case Op::Mma:
        c.kind = Kind::Mma;
        break;
      case Op::Ldmatrix:
        c.kind = Kind::Ldmatrix;
        c.space = ir::AddrSpace::Shared;
        c.bytes = 16;  // one row of 8 b16 elements per addressing lane
        break;
      case Op::Br: case Op::Cbr:
        c.kind = in.op == Op::Br ? Kind::Br : Kind::Cbr;
        for (size_t s = 0; s < in.succs.size() && s < 2; ++s)
          if (auto e = decodeEdge(in, in.succs[s], c.edge[s])) return e;
        break;
      case Op::Ret:
        c.kind = Kind::Ret;
        break;
      case Op::Call:  // Interpreter::load inlines a module's functions before decoding
        return fail(in.loc, "a call reached the interpreter: device functions are inlined first (the inline pass)");
      default: {
        c.kind = Kind::Compute;
        std::string why;
        c.fn = selectCompute(c, why);
        if (!c.fn) return fail(in.loc, why);
        break;
      }
    }
    p_.code.push_back(c);
    return std::nullopt;
  }

  static bool validAtom(const Code& c, std::string& why) {
    Type t = Type::of(c.scalar);
    bool ok = true;
    switch (c.mode) {
      case ir::Mod::AAdd: case ir::Mod::AMin: case ir::Mod::AMax: ok = !t.isBits(); break;
      case ir::Mod::AAnd: case ir::Mod::AOr: case ir::Mod::AXor: case ir::Mod::AInc: case ir::Mod::ADec:
        ok = !t.isFloat();
        break;
      default: break;
    }
    if (!ok) why = "atom." + std::string(ir::modName(c.mode)) + " does not take type " + ir::typeName(t);
    return ok;
  }

  std::optional<Error> decodeEdge(const Inst& in, const ir::BlockCall& call, Edge& e) {
    if (!call.block.valid() || call.block.index >= k_.blocks.size()) return fail(in.loc, "branch to an unknown block");
    const ir::Block& target = k_.block(call.block);
    if (call.args.size() != target.params.size())
      return fail(in.loc, "branch to '^" + target.name + "' passes " + std::to_string(call.args.size()) +
                              " arguments for " + std::to_string(target.params.size()) + " parameters");
    e.block = call.block.index;
    e.moveBegin = static_cast<uint32_t>(p_.moves.size());
    for (size_t i = 0; i < call.args.size(); ++i) {
      ValueId arg = call.args[i], param = target.params[i];
      if (arg.index >= k_.values.size() || k_.typeOf(arg) != k_.typeOf(param))
        return fail(in.loc, "argument " + std::to_string(i + 1) + " of the branch to '^" + target.name +
                                "' does not match the parameter's type " + ir::typeName(k_.typeOf(param)));
      if (std::find(target.params.begin(), target.params.end(), arg) != target.params.end()) e.staged = true;
      p_.moves.push_back({slot_[param.index], slot_[arg.index], slotsOf(k_.typeOf(param))});
      if (!p_.wgSlot.empty())
        p_.wgMoveWrites.push_back((p_.wgSlot[slot_[param.index]] & kWgOperand) &&
                                  !(p_.wgSlot[slot_[arg.index]] & kWgResult));
    }
    e.moveEnd = static_cast<uint32_t>(p_.moves.size());
    return std::nullopt;
  }

  // The register slots wgmma.mma_async reads (accumulator, A fragment) and writes, for the
  // engine's fence and early-read checks (docs/interpreter.md, "wgmma").
  void markWgmmaSlots() {
    for (const ir::Block& b : k_.blocks)
      for (ir::InstId id : b.insts) {
        const Inst& in = k_.inst(id);
        if (in.op != Op::WgmmaMma || in.operands.size() != 4 || !in.result) continue;
        if (p_.wgSlot.empty()) p_.wgSlot.assign(p_.slots, 0);
        p_.wgSlot[slot_[in.operands[0].index]] |= kWgOperand;
        if (k_.typeOf(in.operands[1]).isVector()) p_.wgSlot[slot_[in.operands[1].index]] |= kWgOperand;
        p_.wgSlot[slot_[in.result.index]] |= kWgResult;
      }
  }

  const ir::Module& m_;
  const Kernel& k_;
  Program& p_;
  std::vector<uint32_t> slot_;
};

}  // namespace

std::optional<Error> decode(const ir::Module& m, const ir::Kernel& k, Program& p) {
  p = Program{};
  return Decoder(m, k, p).run();
}

}  // namespace tn::interp::detail
