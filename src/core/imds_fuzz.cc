// libFuzzer target for the IMDS instance document (imds.h), which comes from
// the network (169.254.169.254, or whatever GANTRY_IMDS_ENDPOINT names). Every
// input either parses or fails with DataLoss; nothing crashes. A document that
// parses keeps its facts through ToJson: rebuilding an instance document from
// them parses to the same ImdsInfo (network part aside).
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/core/imds.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gantry::Result<gantry::ImdsInfo> info = gantry::ParseImdsDocument(text, "fuzz");
  if (!info.ok()) {
    Check(info.status().code() == gantry::StatusCode::kDataLoss);
    return 0;
  }
  Check(!info->vm_size.empty());
  Check(info->network_known || (info->public_ips.empty() && info->private_ips.empty()));
  for (const std::string& ip : info->public_ips) Check(!ip.empty());
  (void)info->spot();

  // ToJson's keys are snake_case; the document's are camelCase.
  gantry::Json facts = info->ToJson();
  gantry::Json compute = gantry::Json::object();
  compute["vmSize"] = facts["vm_size"];
  compute["location"] = facts["location"];
  compute["vmId"] = facts["vm_id"];
  compute["name"] = facts["name"];
  compute["zone"] = facts["zone"];
  compute["priority"] = facts["priority"];
  compute["evictionPolicy"] = facts["eviction_policy"];
  compute["publisher"] = facts["publisher"];
  compute["offer"] = facts["offer"];
  compute["sku"] = facts["sku"];
  gantry::Json doc = gantry::Json::object();
  doc["compute"] = compute;
  // Invalid UTF-8 in a string makes dump() throw; the parser accepted it, so
  // dump replacing it is the only difference allowed.
  std::string again_text = doc.dump(-1, ' ', false, gantry::Json::error_handler_t::replace);
  gantry::Result<gantry::ImdsInfo> again = gantry::ParseImdsDocument(again_text, "fuzz again");
  Check(again.ok());
  if (again_text == doc.dump(-1, ' ', false, gantry::Json::error_handler_t::ignore)) {
    Check(again->vm_size == info->vm_size && again->location == info->location &&
          again->vm_id == info->vm_id && again->name == info->name && again->zone == info->zone &&
          again->priority == info->priority && again->eviction_policy == info->eviction_policy &&
          again->publisher == info->publisher && again->offer == info->offer &&
          again->sku == info->sku);
  }
  return 0;
}
