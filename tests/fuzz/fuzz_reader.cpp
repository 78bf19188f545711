// Fuzz target for the .psr record decoder: runs decodeDefs and decodeData over arbitrary bytes.
// Anything but a clean decode or a DecodeError (a crash, a sanitizer report, a hang) is a bug.
//
// With libFuzzer (clang):
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -DPSREC_LIBFUZZER -I.
//     tests/fuzz/fuzz_reader.cpp format/native/decoder.cpp -o /tmp/fuzz_reader   (one line)
//   /tmp/fuzz_reader -max_len=4096 -max_total_time=60 /tmp/corpus
// With g++ (CMake: -DPSREC_BUILD_TOOLS=ON builds psrec_fuzz_reader, add -DPSREC_SANITIZE=ON
// for sanitizers), the main() below runs every file given, or a built-in random mutation loop:
//   psrec_fuzz_reader [iterations [seed]]     or     psrec_fuzz_reader FILE...
// Seed inputs: the decompressed DEFS/DATA payloads of any recording (the first byte of an
// input picks the decoder, so prefix 'D' for defs and anything else for data).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "format/native/constants.hpp"
#include "format/native/decoder.hpp"
#include "format/native/encoder.hpp"

using psrec::format::DecodeError;
using psrec::format::Decoder;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool defs = data[0] == 'D';
  ++data;
  --size;
  try {
    if (defs) {
      Decoder::decodeDefs(data, size);
    } else {
      Decoder dec(4000, 1000);
      psrec::format::SampleColumns cols;
      std::vector<psrec::format::Event> events;
      dec.decodeData(data, size, cols, events);
      // Decode twice with one decoder: the trie is shared across chunks.
      dec.decodeData(data, size, cols, events);
      // Within small budgets of the whole file (spec section 9.3): past one is a BudgetError,
      // and what the decoder keeps stays within them (the trie by at most one delta).
      Decoder small(4000, 1000);
      psrec::format::SampleColumns small_cols;
      const psrec::format::Budgets budgets{64, 2};
      try {
        small.decodeData(data, size, small_cols, events, UINT64_MAX, budgets);
      } catch (const psrec::format::BudgetError&) {
      } catch (const DecodeError&) {
      }
      if (small.trie().size() > budgets.max_nodes + psrec::format::kMaxDepth) std::abort();
      if (small.threadsSeen() > budgets.max_threads + 1) std::abort();
      for (uint32_t node : cols.node)
        if (node >= dec.trie().size()) std::abort();
    }
  } catch (const DecodeError&) {
  }
  return 0;
}

#ifndef PSREC_LIBFUZZER
namespace {

// A small valid DATA payload from the encoder: the mutation loop's starting point.
std::string seedPayload() {
  psrec::format::Encoder enc;
  uint32_t f = enc.internString("f.py");
  uint32_t fr[3];
  for (uint32_t i = 0; i < 3; ++i)
    fr[i] = enc.internFrame(enc.internFunction(f, enc.internString("fn" + std::to_string(i)), i), i);
  uint32_t a = enc.addThread(1, 1, 1, "a", 0);
  uint32_t b = enc.addThread(1, 2, 2, "b", 0);
  for (uint64_t i = 0; i < 20; ++i) {
    enc.beginPass(1000 * (i + 1));
    enc.sample(a, fr, 1 + i % 3, static_cast<uint8_t>(i & 3), i % 2 == 0, i);
    if (i % 5 == 2) enc.sampleError(b); else enc.sample(b, fr + 1, i % 2 + 1, 1, false, 0);
    enc.endPass();
    if (i == 9) enc.marker(1000 * i, "m");
    // asyncio task snapshots (spec 4.3): states with frames, awaits, changes and an end.
    if (i % 4 == 0) {
      const uint32_t awaited[1] = {2};
      enc.beginTaskSnapshot(1, 1000 * (i + 1) + 10);
      enc.taskState(1, psrec::format::kTaskSuspended, "Future", fr, 1 + i % 3, awaited, 1);
      if (i < 12) enc.taskState(2, psrec::format::kTaskReady, "", fr + 1, 1, nullptr, 0);
      enc.endTaskSnapshot();
    }
  }
  return enc.seal().data;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]).find_first_not_of("0123456789") != std::string::npos) {
    for (int i = 1; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
    std::printf("ran %d inputs\n", argc - 1);
    return 0;
  }
  const long iterations = argc > 1 ? std::atol(argv[1]) : 200000;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  const std::string seed = "X" + seedPayload();
  for (long it = 0; it < iterations; ++it) {
    std::string s = seed;
    if (it % 4 == 0) s[0] = 'D';
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && s.size() > 1; ++e) {
      size_t pos = 1 + rng() % (s.size() - 1);
      switch (rng() % 4) {
        case 0: s[pos] = static_cast<char>(s[pos] ^ (1u << (rng() % 8))); break;
        case 1: s[pos] = static_cast<char>(rng()); break;
        case 2: s.insert(pos, 1 + rng() % 8, static_cast<char>(rng())); break;
        default: s.erase(pos, 1 + rng() % 8); break;
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  std::printf("ran %ld mutated inputs\n", iterations);
  return 0;
}
#endif
