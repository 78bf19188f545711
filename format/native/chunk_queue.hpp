// Thread-safe hand-off of sealed chunks from the sampling thread to the writer thread.
// push() never blocks on the consumer: the queue grows instead, and its depth is observable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "format/native/encoder.hpp"

namespace psrec::format {

class ChunkQueue {
 public:
  ChunkQueue() = default;
  ChunkQueue(const ChunkQueue&) = delete;
  ChunkQueue& operator=(const ChunkQueue&) = delete;

  void push(SealedChunk chunk) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(chunk));
      if (queue_.size() > peak_) peak_ = queue_.size();
    }
    cv_.notify_one();
  }

  // Waits up to timeout_ms for a chunk. Empty when the timeout passes or the queue is closed
  // and drained.
  std::optional<SealedChunk> pop(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                 [&] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return std::nullopt;
    SealedChunk c = std::move(queue_.front());
    queue_.pop_front();
    return c;
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

  bool closedAndDrained() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_ && queue_.empty();
  }

  size_t peak() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<SealedChunk> queue_;
  size_t peak_ = 0;
  bool closed_ = false;
};

}  // namespace psrec::format
