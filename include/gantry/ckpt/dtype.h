// Element types of checkpointed tensors, named as in the safetensors format so
// that shards are readable by other tools without translation.
#pragma once

#include <cstddef>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::ckpt {

enum class DType : int {
  kBool = 0,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
  kF8E4M3,
  kF8E5M2,
};

// The safetensors spelling: "BOOL", "U8", ..., "BF16", "F32", "F8_E4M3".
std::string_view DTypeName(DType dtype);
// Inverse of DTypeName (exact, upper case). InvalidArgument names the text.
Result<DType> ParseDType(std::string_view name);
// Bytes per element (1 for kBool and the F8 types).
size_t DTypeSize(DType dtype);

}  // namespace gantry::ckpt
