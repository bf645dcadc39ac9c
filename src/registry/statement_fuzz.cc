// libFuzzer target for what the registry reads from users and stores: the
// in-toto statement (model manifest) and the signature bundle / DSSE envelope.
// Every input parses or fails with InvalidArgument / DataLoss; a statement
// that parses round-trips through StatementJson; nothing crashes.
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/core/json.h"
#include "gantry/registry/registry.h"
#include "gantry/security/dsse.h"

namespace {

using gantry::StatusCode;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool ParseError(const gantry::Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kDataLoss;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto m = gantry::registry::ParseStatement(text);
  if (m.ok()) {
    auto again = gantry::registry::ParseStatement(gantry::registry::StatementJson(*m));
    Check(again.ok());
    Check(again->name == m->name && again->files.size() == m->files.size());
  } else {
    Check(ParseError(m.status()));
  }

  auto env = gantry::registry::ParseBundle(text);
  if (env.ok()) {
    // What parses can be written back and read again unchanged.
    auto back =
        gantry::registry::ParseBundle(gantry::registry::BundleJson(*env, "fuzz-key").dump());
    Check(back.ok());
    Check(back->payload == env->payload && back->payload_type == env->payload_type &&
          back->signatures.size() == env->signatures.size());
  } else {
    Check(ParseError(env.status()));
  }

  auto raw = gantry::security::Base64Decode(text);
  if (raw.ok()) {
    auto back = gantry::security::Base64Decode(gantry::security::Base64Encode(*raw));
    Check(back.ok() && *back == *raw);
  } else {
    Check(raw.status().code() == StatusCode::kInvalidArgument);
  }
  return 0;
}
