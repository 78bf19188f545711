// The unwinder of one Python process: a pass reader (the GIL, the thread list and each thread's
// state, read in one planned batch per pass) and a frame walker (each thread's frames, with
// the checks of its copy), which share what the pass read ahead of each walk.
#pragma once

#include "recorder/native/python/frame_walk.hpp"
#include "recorder/native/python/pass_reader.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/python/unwind_types.hpp"

namespace psrec::recorder {

struct PythonUnwinder {
  explicit PythonUnwinder(PythonProcess& proc) : pass(proc, ahead), frames(proc, ahead) {}
  PythonUnwinder(const PythonUnwinder&) = delete;
  PythonUnwinder& operator=(const PythonUnwinder&) = delete;

  ReadAhead ahead;  // (declared first: the two below hold a reference to it)
  PassReader pass;
  FrameWalker frames;
};

}  // namespace psrec::recorder
