// One file, past 400 lines: the CIE and FDE reader, the call-frame instructions and the DWARF
// expressions share one bounds-checked cursor and one row of rules, which nothing else uses.
#include "recorder/native/native_unwind/call_frame_info.hpp"

#include <cstring>
#include <unordered_map>
#include <utility>

namespace psrec::recorder {

namespace {

// Bytes of the file read at a known link-time address: encoded pointers relative to their own
// position (DW_EH_PE_pcrel) need it. Every read is bounds-checked; a read past the end clears ok.
struct Cursor {
  const uint8_t* p = nullptr;
  const uint8_t* end = nullptr;
  uint64_t vaddr = 0;
  bool ok = true;

  bool left(uint64_t n) {
    if (ok && static_cast<uint64_t>(end - p) >= n) return true;
    ok = false;
    return false;
  }
  template <typename T>
  T fixed() {
    T v{};
    if (!left(sizeof(T))) return v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    vaddr += sizeof(T);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (!left(1)) return 0;
      const uint8_t b = *p++;
      ++vaddr;
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    uint64_t v = 0;
    int shift = 0;
    uint8_t b = 0;
    do {
      if (!left(1)) return 0;
      b = *p++;
      ++vaddr;
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }
  void skip(uint64_t n) {
    if (!left(n)) return;
    p += n;
    vaddr += n;
  }
  // A pointer encoded as DW_EH_PE_* says (only the encodings x86-64 Linux toolchains emit).
  uint64_t pointer(uint8_t enc, uint64_t data_base = 0) {
    if (enc == 0xff) return 0;  // DW_EH_PE_omit
    const uint64_t at = vaddr;
    uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00: v = fixed<uint64_t>(); break;
      case 0x01: v = uleb(); break;
      case 0x02: v = fixed<uint16_t>(); break;
      case 0x03: v = fixed<uint32_t>(); break;
      case 0x04: v = fixed<uint64_t>(); break;
      case 0x09: v = static_cast<uint64_t>(sleb()); break;
      case 0x0a: v = static_cast<uint64_t>(static_cast<int64_t>(fixed<int16_t>())); break;
      case 0x0b: v = static_cast<uint64_t>(static_cast<int64_t>(fixed<int32_t>())); break;
      case 0x0c: v = static_cast<uint64_t>(fixed<int64_t>()); break;
      default: ok = false; return 0;
    }
    switch (enc & 0x70) {
      case 0x00: break;
      case 0x10: v += at; break;          // pcrel
      case 0x30: v += data_base; break;   // datarel
      default: ok = false; return 0;      // textrel, funcrel, aligned: not emitted here
    }
    return v;
  }
};

enum RuleKind : uint8_t { kUndefined, kSame, kOffset, kValOffset, kRegister, kExpression,
                          kValExpression };

struct Rule {
  RuleKind kind = kSame;
  int64_t n = 0;  // offset from the CFA, or a register number
  const uint8_t* expr = nullptr;
  uint64_t expr_len = 0;
};

struct Row {
  bool cfa_is_expr = false;
  int cfa_reg = kDwarfRsp;
  int64_t cfa_off = 8;
  const uint8_t* cfa_expr = nullptr;
  uint64_t cfa_len = 0;
  Rule reg[kDwarfRegisters];
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra = kDwarfReturn;
  uint8_t fde_enc = 0;
  bool augmented = false;  // 'z': FDEs carry augmentation data to skip
  bool signal = false;     // 'S': a signal handler's trampoline
  Cursor insns;
};

// The remember_state stack's depth: compilers nest a few levels at most.
constexpr size_t kMaxRemembered = 16;
// Instructions executed for one row: a hostile or corrupt table cannot make a step slow.
constexpr int kMaxInstructions = 100000;

bool parseCie(const ElfFile& elf, uint64_t vaddr, Cie& cie) {
  const uint8_t* head = elf.bytesAt(vaddr, 4);
  if (!head) return false;
  uint32_t len32;
  std::memcpy(&len32, head, 4);
  if (len32 == 0 || len32 == 0xffffffffu) return false;  // 64-bit .eh_frame: not emitted
  const uint8_t* body = elf.bytesAt(vaddr + 4, len32);
  if (!body) return false;
  Cursor c{body, body + len32, vaddr + 4};
  if (c.fixed<uint32_t>() != 0) return false;  // a CIE's id is 0 in .eh_frame
  const uint8_t version = c.fixed<uint8_t>();
  if (version != 1 && version != 3) return false;
  const char* aug = reinterpret_cast<const char*>(c.p);
  size_t aug_len = 0;
  while (c.left(1) && c.p[0] != 0) c.skip(1), ++aug_len;
  c.skip(1);
  if (aug_len >= 2 && aug[0] == 'e' && aug[1] == 'h') c.skip(8);
  cie.code_align = c.uleb();
  cie.data_align = c.sleb();
  cie.ra = version == 1 ? c.fixed<uint8_t>() : c.uleb();
  if (aug_len > 0 && aug[0] == 'z') {
    cie.augmented = true;
    const uint64_t data_len = c.uleb();
    Cursor data = c;
    c.skip(data_len);
    data.end = c.p;
    for (size_t i = 1; i < aug_len && data.ok; ++i) {
      switch (aug[i]) {
        case 'R': cie.fde_enc = data.fixed<uint8_t>(); break;
        case 'L': data.fixed<uint8_t>(); break;
        case 'P': {
          const uint8_t enc = data.fixed<uint8_t>();
          data.pointer(enc & 0x7f);
          break;
        }
        case 'S': cie.signal = true; break;
        case 'B': break;
        default: i = aug_len; break;  // unknown: the data length lets the rest be skipped
      }
    }
  }
  if (!c.ok || cie.ra >= kDwarfRegisters) return false;
  cie.insns = c;
  return true;
}

void setRule(Row& row, uint64_t reg, Rule rule) {
  if (reg < kDwarfRegisters) row.reg[reg] = rule;  // vector registers: not needed to unwind
}

// Runs call-frame instructions from loc on, up to the row that covers target.
bool execute(Cursor c, const Cie& cie, uint64_t loc, uint64_t target, const Row& initial,
             Row& row) {
  Row remembered[kMaxRemembered];
  size_t depth = 0;
  for (int steps = 0; c.ok && c.p < c.end; ++steps) {
    if (steps > kMaxInstructions) return false;
    const uint8_t op = c.fixed<uint8_t>();
    const uint8_t low = op & 0x3f;
    uint64_t advance = 0;
    switch (op & 0xc0) {
      case 0x40: advance = low; break;
      case 0x80: setRule(row, low, {kOffset, static_cast<int64_t>(c.uleb()) * cie.data_align}); continue;
      case 0xc0: if (low < kDwarfRegisters) row.reg[low] = initial.reg[low]; continue;
      default: break;
    }
    if ((op & 0xc0) == 0) {
      switch (op) {
        case 0x00: continue;  // nop
        case 0x01: {
          const uint64_t to = c.pointer(cie.fde_enc);
          if (to > target) return c.ok;
          loc = to;
          continue;
        }
        case 0x02: advance = c.fixed<uint8_t>(); break;
        case 0x03: advance = c.fixed<uint16_t>(); break;
        case 0x04: advance = c.fixed<uint32_t>(); break;
        case 0x05: {
          const uint64_t reg = c.uleb();
          setRule(row, reg, {kOffset, static_cast<int64_t>(c.uleb()) * cie.data_align});
          continue;
        }
        case 0x06: {
          const uint64_t reg = c.uleb();
          if (reg < kDwarfRegisters) row.reg[reg] = initial.reg[reg];
          continue;
        }
        case 0x07: setRule(row, c.uleb(), {kUndefined}); continue;
        case 0x08: setRule(row, c.uleb(), {kSame}); continue;
        case 0x09: {
          const uint64_t reg = c.uleb();
          setRule(row, reg, {kRegister, static_cast<int64_t>(c.uleb())});
          continue;
        }
        case 0x0a:
          if (depth == kMaxRemembered) return false;
          remembered[depth++] = row;
          continue;
        case 0x0b:
          if (depth == 0) return false;
          row = remembered[--depth];
          continue;
        case 0x0c:
          row.cfa_is_expr = false;
          row.cfa_reg = static_cast<int>(c.uleb());
          row.cfa_off = static_cast<int64_t>(c.uleb());
          continue;
        case 0x0d:
          row.cfa_is_expr = false;
          row.cfa_reg = static_cast<int>(c.uleb());
          continue;
        case 0x0e: row.cfa_off = static_cast<int64_t>(c.uleb()); continue;
        case 0x0f: {
          row.cfa_is_expr = true;
          row.cfa_len = c.uleb();
          row.cfa_expr = c.p;
          c.skip(row.cfa_len);
          continue;
        }
        case 0x10:
        case 0x16: {
          const uint64_t reg = c.uleb();
          Rule r{op == 0x10 ? kExpression : kValExpression};
          r.expr_len = c.uleb();
          r.expr = c.p;
          c.skip(r.expr_len);
          setRule(row, reg, r);
          continue;
        }
        case 0x11: {
          const uint64_t reg = c.uleb();
          setRule(row, reg, {kOffset, c.sleb() * cie.data_align});
          continue;
        }
        case 0x12:
          row.cfa_is_expr = false;
          row.cfa_reg = static_cast<int>(c.uleb());
          row.cfa_off = c.sleb() * cie.data_align;
          continue;
        case 0x13: row.cfa_off = c.sleb() * cie.data_align; continue;
        case 0x14: {
          const uint64_t reg = c.uleb();
          setRule(row, reg, {kValOffset, static_cast<int64_t>(c.uleb()) * cie.data_align});
          continue;
        }
        case 0x15: {
          const uint64_t reg = c.uleb();
          setRule(row, reg, {kValOffset, c.sleb() * cie.data_align});
          continue;
        }
        case 0x2e: c.uleb(); continue;  // DW_CFA_GNU_args_size
        case 0x2f: {                    // DW_CFA_GNU_negative_offset_extended
          const uint64_t reg = c.uleb();
          setRule(row, reg, {kOffset, -static_cast<int64_t>(c.uleb()) * cie.data_align});
          continue;
        }
        default: return false;
      }
    }
    loc += advance * cie.code_align;
    if (loc > target) return c.ok;
  }
  return c.ok;
}

// A DWARF binary operator on a (below) and b (the top); false for a division by zero or an
// operator that is not one.
bool binaryOp(uint8_t op, uint64_t a, uint64_t b, uint64_t* out) {
  const auto sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
  uint64_t r = 0;
  switch (op) {
    case 0x1a: r = a & b; break;
    case 0x1b: if (sb == 0) return false; r = static_cast<uint64_t>(sa / sb); break;
    case 0x1c: r = a - b; break;
    case 0x1d: if (b == 0) return false; r = a % b; break;
    case 0x1e: r = a * b; break;
    case 0x21: r = a | b; break;
    case 0x22: r = a + b; break;
    case 0x24: r = b >= 64 ? 0 : a << b; break;
    case 0x25: r = b >= 64 ? 0 : a >> b; break;
    case 0x26: r = static_cast<uint64_t>(b >= 64 ? (sa < 0 ? -1 : 0) : sa >> b); break;
    case 0x27: r = a ^ b; break;
    case 0x29: r = sa == sb; break;
    case 0x2a: r = sa >= sb; break;
    case 0x2b: r = sa > sb; break;
    case 0x2c: r = sa <= sb; break;
    case 0x2d: r = sa < sb; break;
    case 0x2e: r = sa != sb; break;
    default: return false;  // register locations, TLS, calls: not call-frame information
  }
  *out = r;
  return true;
}

// A DWARF expression (the subset call-frame information uses: PLT entries, signal frames,
// realigned stacks). With push set, the CFA starts on the stack (DW_CFA_expression).
bool evaluate(const uint8_t* expr, uint64_t len, const NativeRegisters& regs, WordReader& mem,
              const uint64_t* push, uint64_t* out) {
  constexpr int kDepth = 64;
  uint64_t st[kDepth];
  int n = 0;
  if (push) st[n++] = *push;
  Cursor c{expr, expr + len, 0};
  int steps = 0;
  auto need = [&](int k) { return n >= k; };
  while (c.ok && c.p < c.end) {
    if (++steps > 10000 || n >= kDepth - 1) return false;
    const uint8_t op = c.fixed<uint8_t>();
    if (op >= 0x30 && op <= 0x4f) {  // DW_OP_lit<n>
      st[n++] = op - 0x30u;
      continue;
    }
    if (op >= 0x70 && op <= 0x8f) {  // DW_OP_breg<n>
      const int reg = op - 0x70;
      const int64_t off = c.sleb();
      if (reg >= kDwarfRegisters || !regs.has(reg)) return false;
      st[n++] = regs.r[reg] + static_cast<uint64_t>(off);
      continue;
    }
    uint64_t a = 0, b = 0;
    switch (op) {
      case 0x06:  // deref
        if (!need(1) || !mem.word(st[n - 1], &st[n - 1])) return false;
        continue;
      case 0x08: st[n++] = c.fixed<uint8_t>(); continue;
      case 0x09: st[n++] = static_cast<uint64_t>(static_cast<int64_t>(c.fixed<int8_t>())); continue;
      case 0x0a: st[n++] = c.fixed<uint16_t>(); continue;
      case 0x0b: st[n++] = static_cast<uint64_t>(static_cast<int64_t>(c.fixed<int16_t>())); continue;
      case 0x0c: st[n++] = c.fixed<uint32_t>(); continue;
      case 0x0d: st[n++] = static_cast<uint64_t>(static_cast<int64_t>(c.fixed<int32_t>())); continue;
      case 0x0e: st[n++] = c.fixed<uint64_t>(); continue;
      case 0x0f: st[n++] = static_cast<uint64_t>(c.fixed<int64_t>()); continue;
      case 0x10: st[n++] = c.uleb(); continue;
      case 0x11: st[n++] = static_cast<uint64_t>(c.sleb()); continue;
      case 0x12: if (!need(1)) return false; st[n] = st[n - 1]; ++n; continue;
      case 0x13: if (!need(1)) return false; --n; continue;
      case 0x14: if (!need(2)) return false; st[n] = st[n - 2]; ++n; continue;
      case 0x15: {
        const uint8_t k = c.fixed<uint8_t>();
        if (!need(k + 1)) return false;
        st[n] = st[n - 1 - k];
        ++n;
        continue;
      }
      case 0x16: if (!need(2)) return false; std::swap(st[n - 1], st[n - 2]); continue;
      case 0x17:
        if (!need(3)) return false;
        a = st[n - 1];
        st[n - 1] = st[n - 2];
        st[n - 2] = st[n - 3];
        st[n - 3] = a;
        continue;
      case 0x19:
        if (!need(1)) return false;
        if (static_cast<int64_t>(st[n - 1]) < 0) st[n - 1] = 0 - st[n - 1];
        continue;
      case 0x1f: if (!need(1)) return false; st[n - 1] = 0 - st[n - 1]; continue;
      case 0x20: if (!need(1)) return false; st[n - 1] = ~st[n - 1]; continue;
      case 0x23: if (!need(1)) return false; st[n - 1] += c.uleb(); continue;
      case 0x2f: {
        const int16_t skip = c.fixed<int16_t>();
        if (skip < 0 && -skip > c.p - expr) return false;
        c.p += skip;
        if (c.p > c.end) return false;
        continue;
      }
      case 0x28: {
        const int16_t skip = c.fixed<int16_t>();
        if (!need(1)) return false;
        if (st[--n] != 0) {
          if (skip < 0 && -skip > c.p - expr) return false;
          c.p += skip;
          if (c.p > c.end) return false;
        }
        continue;
      }
      case 0x92: {
        const uint64_t reg = c.uleb();
        const int64_t off = c.sleb();
        if (reg >= kDwarfRegisters || !regs.has(static_cast<int>(reg))) return false;
        st[n++] = regs.r[reg] + static_cast<uint64_t>(off);
        continue;
      }
      case 0x96: continue;
      default: break;
    }
    // The binary operators: b is the top of the stack, a the one below it.
    if (!need(2)) return false;
    b = st[--n];
    a = st[n - 1];
    uint64_t r = 0;
    if (!binaryOp(op, a, b, &r)) return false;
    st[n - 1] = r;
  }
  if (!c.ok || n == 0) return false;
  *out = st[n - 1];
  return true;
}

}  // namespace

CallFrameInfo::CallFrameInfo(const ElfFile& elf) : rows_(std::make_unique<Rows>()), elf_(elf) {
  const auto [vaddr, size] = elf.ehFrameHdr();
  const uint8_t* hdr = size >= 4 ? elf.bytesAt(vaddr, size) : nullptr;
  if (!hdr) return;
  // version 1; the encodings of the .eh_frame pointer, the count and the table.
  if (hdr[0] != 1 || hdr[3] != 0x3b) return;  // a table of datarel sdata4 pairs, as linkers write
  Cursor c{hdr + 4, hdr + size, vaddr + 4};
  c.pointer(hdr[1], vaddr);
  const uint64_t count = c.pointer(hdr[2], vaddr);
  if (!c.ok || count == 0 || count > (size - static_cast<uint64_t>(c.p - hdr)) / 8) return;
  table_ = c.p;
  hdr_vaddr_ = vaddr;
  count_ = count;
}

uint64_t CallFrameInfo::entryFor(uint64_t lookup) const {
  // The last entry whose initial location is at or below the address (count_ when none).
  auto initial = [&](uint64_t i) {
    int32_t v;
    std::memcpy(&v, table_ + i * 8, 4);
    return hdr_vaddr_ + static_cast<uint64_t>(static_cast<int64_t>(v));
  };
  uint64_t lo = 0, hi = count_;
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (initial(mid) <= lookup) lo = mid; else hi = mid;
  }
  return initial(lo) > lookup ? count_ : lo;
}

namespace {

// An FDE's head: its CIE, its function's range and the cursor at its instructions.
bool readFde(const ElfFile& elf, uint64_t fde, Cie& cie, uint64_t* begin, uint64_t* range,
             Cursor* insns) {
  const uint8_t* head = elf.bytesAt(fde, 8);
  if (!head) return false;
  uint32_t len32, cie_rel;
  std::memcpy(&len32, head, 4);
  std::memcpy(&cie_rel, head + 4, 4);
  if (len32 < 4 || len32 == 0xffffffffu || cie_rel == 0) return false;
  if (!parseCie(elf, fde + 4 - cie_rel, cie)) return false;
  const uint8_t* body = elf.bytesAt(fde + 8, len32 - 4);
  if (!body) return false;
  Cursor c{body, body + (len32 - 4), fde + 8};
  *begin = c.pointer(cie.fde_enc);
  *range = c.pointer(cie.fde_enc & 0x0f);
  if (cie.augmented) c.skip(c.uleb());
  *insns = c;
  return c.ok;
}

}  // namespace

bool CallFrameInfo::fde(uint64_t i, uint64_t* begin, uint64_t* range) const {
  int32_t rel;
  std::memcpy(&rel, table_ + i * 8 + 4, 4);
  Cie cie;
  Cursor insns;
  return readFde(elf_, hdr_vaddr_ + static_cast<uint64_t>(static_cast<int64_t>(rel)), cie, begin,
                 range, &insns);
}

std::pair<uint64_t, uint64_t> CallFrameInfo::largestFunction() const {
  std::pair<uint64_t, uint64_t> best{0, 0};
  for (uint64_t i = 0; table_ && i < count_; ++i) {
    uint64_t begin, range;
    if (fde(i, &begin, &range) && range > best.second - best.first) best = {begin, begin + range};
  }
  return best;
}

std::pair<uint64_t, uint64_t> CallFrameInfo::functionAt(uint64_t lookup) const {
  if (!table_) return {0, 0};
  const uint64_t i = entryFor(lookup);
  uint64_t begin, range;
  if (i == count_ || !fde(i, &begin, &range) || lookup - begin >= range) return {0, 0};
  return {begin, begin + range};
}

// What a lookup address's rules are, once found.
struct CallFrameInfo::Found {
  UnwindStep status = UnwindStep::kNoInfo;  // kOk, or why there are no rules
  bool signal = false;
  uint8_t ra = kDwarfReturn;
  Row row;
};

struct CallFrameInfo::Rows {
  // A bound on memory: a program's hot code is a few thousand call sites.
  static constexpr size_t kMax = 8192;
  std::unordered_map<uint64_t, Found> by_lookup;
};

CallFrameInfo::~CallFrameInfo() = default;

CallFrameInfo::Found CallFrameInfo::find(uint64_t lookup) const {
  Found found;
  const uint64_t i = entryFor(lookup);
  if (i == count_) return found;
  int32_t fde_rel;
  std::memcpy(&fde_rel, table_ + i * 8 + 4, 4);
  Cie cie;
  uint64_t begin, range;
  Cursor c;
  found.status = UnwindStep::kFailed;
  if (!readFde(elf_, hdr_vaddr_ + static_cast<uint64_t>(static_cast<int64_t>(fde_rel)), cie,
               &begin, &range, &c))
    return found;
  found.status = UnwindStep::kNoInfo;
  if (lookup < begin || lookup - begin >= range) return found;
  found.status = UnwindStep::kFailed;
  Row initial_row;
  initial_row.cfa_off = 0;
  if (!execute(cie.insns, cie, 0, ~uint64_t{0}, initial_row, initial_row)) return found;
  found.row = initial_row;
  if (!execute(c, cie, begin, lookup, initial_row, found.row)) return found;
  // A return-address column no register holds: nothing to return to.
  found.status = cie.ra < kDwarfRegisters ? UnwindStep::kOk : UnwindStep::kOutermost;
  found.signal = cie.signal;
  found.ra = static_cast<uint8_t>(cie.ra);
  return found;
}

UnwindStep CallFrameInfo::step(uint64_t lookup, NativeRegisters& regs, WordReader& mem,
                               bool* signal_frame) const {
  if (!table_) return UnwindStep::kNoInfo;
  auto it = rows_->by_lookup.find(lookup);
  if (it == rows_->by_lookup.end()) {
    if (rows_->by_lookup.size() >= Rows::kMax) rows_->by_lookup.clear();
    it = rows_->by_lookup.emplace(lookup, find(lookup)).first;
  }
  const Found& found = it->second;
  if (found.status != UnwindStep::kOk) return found.status;
  const Row& row = found.row;
  const uint64_t ra = found.ra;
  uint64_t cfa = 0;
  if (row.cfa_is_expr) {
    if (!evaluate(row.cfa_expr, row.cfa_len, regs, mem, nullptr, &cfa)) return UnwindStep::kFailed;
  } else {
    if (row.cfa_reg < 0 || row.cfa_reg >= kDwarfRegisters || !regs.has(row.cfa_reg))
      return UnwindStep::kFailed;
    cfa = regs.r[row.cfa_reg] + static_cast<uint64_t>(row.cfa_off);
  }
  NativeRegisters next;
  for (int i = 0; i < kDwarfRegisters; ++i) {
    const Rule& rule = row.reg[i];
    uint64_t v = 0;
    switch (rule.kind) {
      case kUndefined:
        continue;
      case kSame:
        if (i == static_cast<int>(ra) || !regs.has(i)) continue;
        next.set(i, regs.r[i]);
        continue;
      case kOffset:
        if (!mem.word(cfa + static_cast<uint64_t>(rule.n), &v)) return UnwindStep::kFailed;
        break;
      case kValOffset:
        v = cfa + static_cast<uint64_t>(rule.n);
        break;
      case kRegister:
        if (rule.n < 0 || rule.n >= kDwarfRegisters || !regs.has(static_cast<int>(rule.n))) continue;
        v = regs.r[rule.n];
        break;
      case kExpression: {
        uint64_t at = 0;
        if (!evaluate(rule.expr, rule.expr_len, regs, mem, &cfa, &at) || !mem.word(at, &v))
          return UnwindStep::kFailed;
        break;
      }
      case kValExpression:
        if (!evaluate(rule.expr, rule.expr_len, regs, mem, &cfa, &v)) return UnwindStep::kFailed;
        break;
    }
    next.set(i, v);
  }
  if (row.reg[kDwarfRsp].kind == kSame) next.set(kDwarfRsp, cfa);
  if (!next.has(static_cast<int>(ra))) return UnwindStep::kOutermost;
  const uint64_t ret = next.r[ra];
  next.known &= ~(1u << kDwarfReturn);
  next.set(kDwarfReturn, ret);
  if (ret == 0) return UnwindStep::kOutermost;
  *signal_frame = found.signal;
  regs = next;
  return UnwindStep::kOk;
}

}  // namespace psrec::recorder
