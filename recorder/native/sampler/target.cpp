// A followed process (see target.hpp).
#include "recorder/native/sampler/target.hpp"

#include <algorithm>
#include <utility>

#include "format/native/constants.hpp"

namespace psrec::recorder {

namespace {

// A process that starts a program is tried for this long to be Python (its loader maps
// libpython, its runtime initialises); then only when it execs again.
constexpr uint64_t kAttachWindowNs = 3000000000ull;
// A child found running its parent's executable is first tried this long after it was found.
// Most such children are about to exec another program (subprocess, multiprocessing's spawn
// and its resource tracker fork and then exec at once): until then the child is a frozen copy
// of its parent, whose stack would be recorded as a process of its own. A child that stays a
// fork (multiprocessing's fork, os.fork workers) loses this much of its start.
constexpr uint64_t kForkGraceNs = 30000000;

}  // namespace

std::unique_ptr<Target> Target::first(pid_t pid, bool launched, uint64_t now) {
  auto t = std::make_unique<Target>();
  t->pid = pid;
  t->root = true;
  t->image = processImage(pid);
  try {
    t->proc = PythonProcess::attach(pid);
    if (launched && !t->proc->mainInterpreter()) {
      t->proc.reset();
      t->why = "its Python runtime is not initialised yet";
      t->why_code = ErrorCode::kReadFailed;
    }
  } catch (const RecorderError& e) {
    // A launched program may start Python later (or, with subprocesses, start Python
    // processes): it is watched. Only a process psrec cannot see at all is refused.
    if (!launched || e.code() == ErrorCode::kNoSuchProcess ||
        e.code() == ErrorCode::kPermissionDenied)
      throw;
    t->why = e.what();
    t->why_code = e.code();
  }
  t->watch_ns = t->next_try_ns = now;
  return t;
}

std::unique_ptr<Target> Target::child(pid_t pid, pid_t parent, uint64_t now) {
  auto t = std::make_unique<Target>();
  t->pid = pid;
  t->ppid = parent;
  t->image = processImage(pid);
  t->watch_ns = t->next_try_ns = now;
  if (t->image && t->image == processImage(parent)) {
    t->next_try_ns = now + kForkGraceNs;  // tried by the watch, on the new image if it exec'd
    t->why = "it has not exec'd since its parent forked it";
    t->why_code = ErrorCode::kReadFailed;
  }
  return t;
}

void Target::openReaders() {
  unwinder = std::make_unique<PythonUnwinder>(*proc);
  codes = std::make_unique<CodeCache>(*proc);
  reader = std::make_unique<StackReader>(*proc, *unwinder, *codes);
  list = std::make_unique<ThreadListWalk>(unwinder->pass);
  // Deeper than kMaxDepth: the encoder gets one frame more than it keeps, so it cuts and
  // marks the stack instead of the walk cutting it silently.
  reader->setMaxDepth(format::kMaxDepth + 1);
  unwinder->pass.setCodeCache(codes.get());
  names = std::make_unique<ThreadNames>(*proc);
}

bool Target::tryAttach(uint64_t now) {
  const uint64_t since = now - watch_ns;
  // Often while a program starts (it runs Python within milliseconds if it does), then less.
  next_try_ns = now + std::clamp<uint64_t>(since / 8, 2000000, kWatchNs);
  const uint64_t now_image = processImage(pid);
  try {
    auto p = PythonProcess::attach(pid);
    if (p->mainInterpreter()) {
      proc = std::move(p);
      if (now_image) image = now_image;
      return true;
    }
    why = "its Python runtime is not initialised yet";
    why_code = ErrorCode::kReadFailed;
  } catch (const RecorderError& e) {
    why = e.what();
    why_code = e.code();
  }
  if (since >= kAttachWindowNs) attach_over = true;
  return false;
}

void Target::execedInto(uint64_t new_image, uint64_t now) {
  // The threads first: each gives up its place in the capture, which the move below ends.
  threads.clear();
  native.reset();
  tasks.reset();  // (it reads through proc)
  Target fresh;
  fresh.pid = pid;
  fresh.ppid = ppid;
  fresh.root = root;
  fresh.recorded = recorded;
  fresh.image = new_image;
  fresh.watch_ns = fresh.next_try_ns = now;
  fresh.why = "it exec'd a program that does not run Python yet";
  fresh.why_code = ErrorCode::kReadFailed;
  *this = std::move(fresh);
}

}  // namespace psrec::recorder
