// The unwinder of one Python process: a pass reader (the GIL, the thread list and each thread's
// state, read in one planned batch per pass) and a frame walker (each thread's frames, with
// the checks of its copy), which share what the pass read ahead of each walk.
#pragma once

#include "recorder/native/frame_walk.hpp"
#include "recorder/native/pass_reader.hpp"
#include "recorder/native/python_process.hpp"
#include "recorder/native/unwind_types.hpp"

namespace psrec::recorder {

struct Unwinder {
  explicit Unwinder(PythonProcess& proc) : pass(proc, ahead), frames(proc, ahead) {}
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  ReadAhead ahead;  // (declared first: the two below hold a reference to it)
  PassReader pass;
  FrameWalker frames;
};

}  // namespace psrec::recorder
