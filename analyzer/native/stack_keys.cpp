#include "analyzer/native/stack_keys.hpp"

#include <algorithm>
#include <charconv>

namespace psrec::analyzer {

StackKeys::StackKeys(const uint32_t* parents, const uint32_t* frames, size_t n,
                     std::vector<uint32_t> frame_key, uint32_t empty_key)
    : parents_(parents), shown_(n, 0), n_(n), leaf_(n, empty_key), empty_key_(empty_key) {
  uint32_t top = empty_key_;
  for (uint32_t k : frame_key)
    if (k != kSkipKey) top = std::max(top, k);
  key_count_ = top + 1;
  if (n) leaf_[0] = empty_key_;
  for (size_t i = 1; i < n; ++i) {
    const uint32_t k = frames[i] < frame_key.size() ? frame_key[frames[i]] : 0;
    leaf_[i] = k;
    // A parent precedes its child: its nearest shown node is known.
    shown_[i] = k == kSkipKey ? shown_[up(static_cast<uint32_t>(i))] : static_cast<uint32_t>(i);
  }
}

void StackKeys::keys(uint32_t node, std::vector<uint32_t>& out) const {
  out.clear();
  if (node >= n_) node = 0;
  for (uint32_t n = node < n_ ? shown_[node] : 0; n != 0; n = shown_[up(n)])
    out.push_back(leaf_[n]);
  if (out.empty()) {
    out.push_back(empty_key_);
    return;
  }
  std::reverse(out.begin(), out.end());
}

namespace {

// Count and value per node over the rows (a node past the trie is the empty stack), so that
// each distinct stack is walked once however many rows (slices, threads) hold it.
struct PerNode {
  std::vector<uint64_t> count, value;
  std::vector<uint32_t> used;  // nodes with a row, in order of first row
};

PerNode perNode(const StackKeys& sk, const NodeRows& r) {
  PerNode p;
  const size_t nodes = std::max<size_t>(sk.nodes(), 1);
  p.count.assign(nodes, 0);
  p.value.assign(nodes, 0);
  std::vector<uint8_t> seen(nodes, 0);
  for (size_t i = 0; i < r.n; ++i) {
    if (r.thread && r.thread[i] != r.only) continue;
    const uint32_t node = r.node[i] < nodes ? r.node[i] : 0;
    if (!seen[node]) {
      seen[node] = 1;
      p.used.push_back(node);
    }
    p.count[node] += r.count[i];
    p.value[node] += r.value[i] * r.value_scale;
  }
  return p;
}

}  // namespace

KeyTotals keyTotals(const StackKeys& sk, const NodeRows& rows) {
  const PerNode p = perNode(sk, rows);
  const size_t nk = sk.keyCount();
  KeyTotals t;
  t.own_count.assign(nk, 0);
  t.own.assign(nk, 0);
  t.total_count.assign(nk, 0);
  t.total.assign(nk, 0);
  std::vector<size_t> stamp(nk, SIZE_MAX);  // row that last counted the key
  std::vector<uint32_t> ks;
  for (size_t i = 0; i < p.used.size(); ++i) {
    const uint32_t node = p.used[i];
    const uint64_t count = p.count[node], value = p.value[node];
    sk.keys(node, ks);
    t.own_count[ks.back()] += count;
    t.own[ks.back()] += value;
    for (uint32_t k : ks) {
      if (stamp[k] == i) continue;
      stamp[k] = i;
      t.total_count[k] += count;
      t.total[k] += value;
    }
  }
  return t;
}

KeyEdges keyEdges(const StackKeys& sk, const NodeRows& rows) {
  const PerNode p = perNode(sk, rows);
  struct Sums {
    uint64_t count = 0, own = 0, cum = 0;
  };
  std::unordered_map<uint64_t, size_t> index;  // caller << 32 | callee -> row
  KeyEdges e;
  std::vector<uint32_t> ks;
  std::vector<uint64_t> edges;
  auto row = [&](uint64_t edge) {
    auto [it, added] = index.emplace(edge, e.caller.size());
    if (added) {
      e.caller.push_back(static_cast<uint32_t>(edge >> 32));
      e.callee.push_back(static_cast<uint32_t>(edge));
      e.count.push_back(0);
      e.own.push_back(0);
      e.cum.push_back(0);
    }
    return it->second;
  };
  for (uint32_t node : p.used) {
    const uint64_t count = p.count[node], value = p.value[node];
    sk.keys(node, ks);
    if (ks.size() < 2) continue;
    edges.clear();
    for (size_t j = 1; j < ks.size(); ++j)
      edges.push_back(static_cast<uint64_t>(ks[j - 1]) << 32 | ks[j]);
    const uint64_t innermost = edges.back();
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    for (uint64_t edge : edges) e.cum[row(edge)] += value;
    const size_t r = row(innermost);
    e.count[r] += count;
    e.own[r] += value;
  }
  return e;
}

SliceSums sliceSums(const StackKeys& sk, const CellColumnsView& c) {
  struct ThreadSums {
    uint64_t count = 0, gil = 0, on_cpu = 0;
  };
  // (slice, thread) and (slice, key) pairs; slices are 64-bit, so they are not packed with
  // the other half into one integer.
  using Pair = std::pair<uint64_t, uint32_t>;
  struct PairHash {
    size_t operator()(const Pair& p) const {
      uint64_t h = p.first * 0x9E3779B97F4A7C15ULL ^ p.second;
      return static_cast<size_t>(h ^ (h >> 31));
    }
  };
  std::unordered_map<Pair, ThreadSums, PairHash> threads;
  std::unordered_map<Pair, uint64_t, PairHash> keys;
  for (size_t i = 0; i < c.n; ++i) {
    ThreadSums& t = threads[{c.slice[i], c.thread[i]}];
    t.count += c.count[i];
    t.gil += c.gil[i];
    t.on_cpu += c.on_cpu[i];
    keys[{c.slice[i], sk.leaf(c.node[i])}] += c.value[i] * c.value_scale;
  }
  SliceSums s;
  std::vector<Pair> order;
  order.reserve(threads.size());
  for (auto& kv : threads) order.push_back(kv.first);
  std::sort(order.begin(), order.end());
  for (const Pair& k : order) {
    const ThreadSums& t = threads[k];
    s.thread_slice.push_back(k.first);
    s.thread.push_back(k.second);
    s.count.push_back(t.count);
    s.gil.push_back(t.gil);
    s.on_cpu.push_back(t.on_cpu);
  }
  order.clear();
  for (auto& kv : keys) order.push_back(kv.first);
  std::sort(order.begin(), order.end());
  for (const Pair& k : order) {
    s.key_slice.push_back(k.first);
    s.key.push_back(k.second);
    s.value.push_back(keys[k]);
  }
  return s;
}

void SpeedscopeText::setThread(const RunsView& runs, Value kind, uint64_t count_mult,
                               uint64_t scale) {
  // Number the frames of each new stack, in order of first use, and give every stack that
  // renders alike one canonical id.
  if (text_at_.size() < sk_.nodes()) {
    text_at_.resize(sk_.nodes(), -1);
    text_len_.resize(sk_.nodes(), 0);
  }
  std::vector<uint32_t> canon(sk_.nodes(), 0);
  std::unordered_map<std::string, uint32_t> canon_of_text;
  std::vector<uint32_t> ks;
  std::string text;
  char num[24];
  for (size_t i = 0; i < runs.n; ++i) {
    const uint32_t node = runs.node[i] < sk_.nodes() ? runs.node[i] : 0;
    if (text_at_[node] < 0) {
      sk_.keys(node, ks);
      text.assign(1, '[');
      for (size_t j = 0; j < ks.size(); ++j) {
        int64_t& f = frame_of_key_[ks[j]];
        if (f < 0) {
          f = static_cast<int64_t>(keys_in_order_.size());
          keys_in_order_.push_back(ks[j]);
        }
        if (j) text.push_back(',');
        auto r = std::to_chars(num, num + sizeof num, f);
        text.append(num, r.ptr);
      }
      text.push_back(']');
      text_at_[node] = static_cast<int64_t>(texts_.size());
      text_len_[node] = static_cast<uint32_t>(text.size());
      texts_ += text;
    }
    if (canon[node] == 0) {
      std::string t(texts_, static_cast<size_t>(text_at_[node]), text_len_[node]);
      canon[node] = canon_of_text.emplace(std::move(t), node + 1).first->second;
    }
  }
  // Nodes are renumbered to their canonical id (+1, so that 0 stays "unseen") for the merge;
  // the merged runs keep their first node.
  runs_ = mergeRuns(runs, canon);
  values_.resize(runs_.size());
  kept_ = total_ = samples_ = 0;
  for (size_t i = 0; i < runs_.size(); ++i) {
    uint64_t v = kind == Value::kCount  ? runs_.count[i] * count_mult
                 : kind == Value::kCpu ? runs_.cpu[i]
                                       : runs_.weight[i];
    v *= scale;
    values_[i] = v;
    samples_ += runs_.count[i];
    if (v > 0) {
      ++kept_;
      total_ += v;
    }
  }
  start_ = 0;
  if (runs_.size()) {
    const int64_t s = (runs_.first_ts[0] - static_cast<int64_t>(runs_.weight[0])) *
                      static_cast<int64_t>(scale);
    start_ = std::max<int64_t>(0, s);
  }
  sample_pos_ = weight_pos_ = 0;
  sample_first_ = weight_first_ = true;
}

std::string SpeedscopeText::samplesChunk(size_t max_bytes) {
  std::string out;
  out.reserve(max_bytes + 256);
  for (; sample_pos_ < runs_.size() && out.size() < max_bytes; ++sample_pos_) {
    if (values_[sample_pos_] == 0) continue;
    if (!sample_first_) out.push_back(',');
    sample_first_ = false;
    uint32_t node = runs_.node[sample_pos_] < sk_.nodes() ? runs_.node[sample_pos_] : 0;
    out.append(texts_, static_cast<size_t>(text_at_[node]), text_len_[node]);
  }
  return out;
}

std::string SpeedscopeText::weightsChunk(size_t max_bytes) {
  std::string out;
  out.reserve(max_bytes + 32);
  char num[24];
  for (; weight_pos_ < runs_.size() && out.size() < max_bytes; ++weight_pos_) {
    const uint64_t v = values_[weight_pos_];
    if (v == 0) continue;
    if (!weight_first_) out.push_back(',');
    weight_first_ = false;
    auto r = std::to_chars(num, num + sizeof num, v);
    out.append(num, r.ptr);
  }
  return out;
}

}  // namespace psrec::analyzer
