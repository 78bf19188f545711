#include "analyzer/native/group_sums.hpp"

#include <unordered_map>

namespace psrec::analyzer {

namespace {

struct Key {
  uint64_t slice;
  uint32_t thread;
  uint32_t node;
  bool operator==(const Key& o) const {
    return slice == o.slice && thread == o.thread && node == o.node;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = k.slice * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<uint64_t>(k.thread) << 32 | k.node) + 0x7F4A7C159E3779B9ull + (h << 6) +
         (h >> 2);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

}  // namespace

Groups groupSums(const std::vector<GroupSource>& sources, uint64_t factor, bool by_node) {
  if (factor == 0) factor = 1;
  const size_t width = sources.size();
  Groups g;
  std::unordered_map<Key, size_t, KeyHash> rows;
  size_t total = 0;
  for (const auto& s : sources) total += s.n;
  rows.reserve(total / (width ? width : 1) + 16);
  for (size_t src = 0; src < width; ++src) {
    const GroupSource& s = sources[src];
    for (size_t i = 0; i < s.n; ++i) {
      const Key k{s.slice[i] / factor, s.thread[i], by_node ? s.node[i] : 0u};
      auto [it, fresh] = rows.try_emplace(k, g.slice.size());
      if (fresh) {
        g.slice.push_back(k.slice);
        g.thread.push_back(k.thread);
        g.node.push_back(k.node);
        g.values.resize(g.values.size() + width, 0);
      }
      g.values[it->second * width + src] += s.value[i];
    }
  }
  return g;
}

}  // namespace psrec::analyzer
