// A growable byte buffer for socket reads: received bytes sit between begin
// and end; Prepare() hands out writable space without zero-filling it (unlike
// std::string::resize), Consume() drops handled bytes from the front.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace gantry::gateway::internal {

class Buffer {
 public:
  explicit Buffer(size_t initial = 16 << 10) : data_(new char[initial]), cap_(initial) {}

  std::string_view view() const { return {data_.get() + begin_, end_ - begin_}; }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }

  // Writable space of at least `min` bytes after the data.
  char* Prepare(size_t min, size_t* avail) {
    if (cap_ - end_ < min) {
      size_t used = end_ - begin_;
      if (begin_ > 0 && cap_ - used >= min) {
        std::memmove(data_.get(), data_.get() + begin_, used);
      } else {
        size_t ncap = cap_;
        while (ncap - used < min) ncap *= 2;
        std::unique_ptr<char[]> n(new char[ncap]);
        std::memcpy(n.get(), data_.get() + begin_, used);
        data_ = std::move(n);
        cap_ = ncap;
      }
      begin_ = 0;
      end_ = used;
    }
    *avail = cap_ - end_;
    return data_.get() + end_;
  }
  void Commit(size_t n) { end_ += n; }
  void Consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  void Clear() { begin_ = end_ = 0; }
  // Returns to the initial size when empty and grown past `limit`.
  void ShrinkIfLarge(size_t limit, size_t initial = 16 << 10) {
    if (begin_ == end_ && cap_ > limit) {
      data_.reset(new char[initial]);
      cap_ = initial;
      begin_ = end_ = 0;
    }
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t cap_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace gantry::gateway::internal
