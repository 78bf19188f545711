#include "recorder/native/python/thread_names.hpp"

#include <unordered_set>

namespace psrec::recorder {

bool ThreadNames::read(std::unordered_map<uint64_t, std::string>& out, bool fresh) {
  const auto& l = proc_.layout();
  if (!active_) {
    // sys.modules["threading"].__dict__["_active"]; the dict lives as long as the module.
    uint64_t interp = proc_.mainInterpreter(), modules = 0, md = 0;
    if (!interp || l.interp_modules == cpython::kAbsent || l.module_dict == cpython::kAbsent ||
        !proc_.mem().readValue(interp + static_cast<uint64_t>(l.interp_modules), modules))
      return false;
    uint64_t threading = objs_.dictGet(modules, "threading");
    if (!threading ||
        !proc_.mem().readValue(threading + static_cast<uint64_t>(l.module_dict), md))
      return false;
    active_ = objs_.dictGet(md, "_active");
    if (!active_) return false;
  }
  if (!objs_.dictEntries(active_, entries_, 1 << 16)) return false;
  std::unordered_set<uint64_t> live;
  for (const DictEntry& e : entries_) {
    // Keys are ints (thread idents), whose hash is the value itself below 2**61 - 1.
    if (!e.has_hash) continue;
    const uint64_t ident = e.hash;
    live.insert(ident);
    Known& k = known_[ident];
    const bool same_thread = k.thread == e.value;
    if (same_thread && !fresh && out.count(ident)) continue;
    uint64_t name_obj = objs_.attribute(e.value, "_name");
    if (!name_obj) continue;
    if (same_thread && name_obj == k.name_obj && out.count(ident)) continue;
    std::string name;
    if (!objs_.isStr(name_obj) || !readUnicode(proc_.mem(), l, name_obj, name, 1024)) continue;
    k.thread = e.value;
    k.name_obj = name_obj;
    out[ident] = std::move(name);
  }
  for (auto it = known_.begin(); it != known_.end();) {
    if (live.count(it->first)) {
      ++it;
    } else {
      out.erase(it->first);
      it = known_.erase(it);
    }
  }
  return true;
}

}  // namespace psrec::recorder
