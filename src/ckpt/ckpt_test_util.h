// Helpers shared by the ckpt tests: a temporary directory and deterministic
// tensors whose contents depend on the step, so a load can be checked.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <string>
#include <vector>

#include "gantry/ckpt/manager.h"
#include "gantry/storage/filesystem.h"
#include "testing/temp_dir.h"

namespace gantry::ckpt::testing {

using gantry::testing::TempDir;

// A small model state: a few float tensors and one int64 tensor whose values
// are a function of `step`.
class State {
 public:
  explicit State(int64_t step, size_t floats = 1000) {
    a_.resize(floats);
    b_.resize(floats / 3 + 1);
    for (size_t i = 0; i < a_.size(); ++i) a_[i] = static_cast<float>(step * 1000 + i) * 0.5f;
    for (size_t i = 0; i < b_.size(); ++i) b_[i] = static_cast<float>(step) - static_cast<float>(i);
    c_ = step;
  }
  std::vector<TensorView> Views() const {
    return {
        {"model.a", DType::kF32, {static_cast<int64_t>(a_.size())}, a_.data(), a_.size() * 4},
        {"model.b", DType::kF32, {1, static_cast<int64_t>(b_.size())}, b_.data(), b_.size() * 4},
        {"optim.step", DType::kI64, {}, &c_, 8},
    };
  }
  // Expects `loaded` to hold exactly this state's tensors.
  void ExpectEquals(const LoadedCheckpoint& loaded) const {
    auto views = Views();
    ASSERT_EQ(loaded.tensors.size(), views.size());
    for (size_t i = 0; i < views.size(); ++i) {
      const Tensor& t = loaded.tensors[i];
      EXPECT_EQ(t.name, views[i].name);
      EXPECT_EQ(t.dtype, views[i].dtype);
      EXPECT_EQ(t.shape, views[i].shape);
      ASSERT_EQ(t.data.size(), views[i].bytes) << t.name;
      EXPECT_EQ(std::memcmp(t.data.data(), views[i].data, views[i].bytes), 0) << t.name;
    }
  }

 private:
  std::vector<float> a_;
  std::vector<float> b_;
  int64_t c_ = 0;
};

}  // namespace gantry::ckpt::testing
