// The names threads have in Python (threading.Thread.name), read from the target's
// threading._active: {thread ident: Thread}, then each Thread's _name. Threads that threading
// does not know (started with _thread, or before threading is imported) have none.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "recorder/native/python/py_objects.hpp"
#include "recorder/native/python/python_process.hpp"

namespace psrec::recorder {

class ThreadNames {
 public:
  explicit ThreadNames(PythonProcess& proc) : proc_(proc), objs_(proc.mem(), proc.layout()) {}

  // Reads the names of the threads threading knows into out, by Python thread id (entries of
  // threads threading no longer knows are dropped). With fresh, every name is read again
  // (renames); otherwise only threads not read before. False when threading is not imported
  // (yet) or its state could not be read.
  bool read(std::unordered_map<uint64_t, std::string>& out, bool fresh);

 private:
  PythonProcess& proc_;
  ObjectReader objs_;
  uint64_t active_ = 0;  // the threading._active dict
  struct Known {
    uint64_t thread = 0;    // the Thread object
    uint64_t name_obj = 0;  // its _name when last read
  };
  std::unordered_map<uint64_t, Known> known_;
  std::vector<DictEntry> entries_;
};

}  // namespace psrec::recorder
