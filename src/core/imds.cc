#include "gantry/core/imds.h"

#include <cstdlib>

#include "gantry/core/http_client.h"

namespace gantry {
namespace {

constexpr const char* kEndpointEnv = "GANTRY_IMDS_ENDPOINT";

std::string EndpointFromEnv() {
  const char* env = std::getenv(kEndpointEnv);
  return env != nullptr && *env != '\0' ? std::string(env)
                                        : std::string(AzureImds::kDefaultEndpoint);
}

// Reads compute.<key> into *out: absent or null leaves "", a non-string is an error.
Status ReadString(const Json& compute, const char* key, std::string_view origin, std::string* out) {
  auto it = compute.find(key);
  if (it == compute.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) {
    return DataLoss(std::string(origin) + ": compute." + key + " is a " + it->type_name() +
                    ", expected a string");
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

// network.interface[].ipv4|ipv6.ipAddress[] into info; false (and nothing
// kept) when any part is not shaped as Azure documents it.
bool ReadNetwork(const Json& doc, ImdsInfo* info) {
  auto network = doc.find("network");
  if (network == doc.end() || !network->is_object()) return false;
  auto interfaces = network->find("interface");
  if (interfaces == network->end() || !interfaces->is_array()) return false;
  std::vector<std::string> pub, priv;
  for (const Json& nic : *interfaces) {
    if (!nic.is_object()) return false;
    for (const char* family : {"ipv4", "ipv6"}) {
      auto fam = nic.find(family);
      if (fam == nic.end() || fam->is_null()) continue;
      if (!fam->is_object()) return false;
      auto addrs = fam->find("ipAddress");
      if (addrs == fam->end() || addrs->is_null()) continue;
      if (!addrs->is_array()) return false;
      for (const Json& a : *addrs) {
        if (!a.is_object()) return false;
        for (auto [key, out] :
             {std::pair{"publicIpAddress", &pub}, std::pair{"privateIpAddress", &priv}}) {
          auto v = a.find(key);
          if (v == a.end() || v->is_null()) continue;
          if (!v->is_string()) return false;
          if (!v->get_ref<const std::string&>().empty()) out->push_back(v->get<std::string>());
        }
      }
    }
  }
  info->public_ips = std::move(pub);
  info->private_ips = std::move(priv);
  return true;
}

}  // namespace

Json ImdsInfo::ToJson() const {
  Json j;
  j["vm_size"] = vm_size;
  j["location"] = location;
  j["vm_id"] = vm_id;
  j["name"] = name;
  j["zone"] = zone;
  j["priority"] = priority;
  j["eviction_policy"] = eviction_policy;
  j["publisher"] = publisher;
  j["offer"] = offer;
  j["sku"] = sku;
  return j;
}

Result<ImdsInfo> ParseImdsDocument(std::string_view text, std::string_view origin) {
  auto doc = ParseJson(text, origin);
  // A document that does not parse is a damaged response, not bad user input.
  if (!doc.ok()) return DataLoss(doc.status().message());
  auto compute = doc->find("compute");
  if (compute == doc->end() || !compute->is_object()) {
    return DataLoss(std::string(origin) + ": no \"compute\" object in the instance document");
  }
  ImdsInfo info;
  RETURN_IF_ERROR(ReadString(*compute, "vmSize", origin, &info.vm_size));
  if (info.vm_size.empty()) {
    return DataLoss(std::string(origin) + ": compute.vmSize is missing or empty");
  }
  RETURN_IF_ERROR(ReadString(*compute, "location", origin, &info.location));
  RETURN_IF_ERROR(ReadString(*compute, "vmId", origin, &info.vm_id));
  RETURN_IF_ERROR(ReadString(*compute, "name", origin, &info.name));
  RETURN_IF_ERROR(ReadString(*compute, "zone", origin, &info.zone));
  RETURN_IF_ERROR(ReadString(*compute, "priority", origin, &info.priority));
  RETURN_IF_ERROR(ReadString(*compute, "evictionPolicy", origin, &info.eviction_policy));
  RETURN_IF_ERROR(ReadString(*compute, "publisher", origin, &info.publisher));
  RETURN_IF_ERROR(ReadString(*compute, "offer", origin, &info.offer));
  RETURN_IF_ERROR(ReadString(*compute, "sku", origin, &info.sku));
  info.network_known = ReadNetwork(*doc, &info);
  return info;
}

AzureImds::AzureImds() : AzureImds(EndpointFromEnv()) {}

AzureImds::AzureImds(std::string endpoint, std::chrono::milliseconds deadline)
    : deadline_(deadline) {
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  url_ = endpoint + std::string(kInstancePath);
}

Result<ImdsInfo> AzureImds::Fetch() const {
  http::Request req;
  req.url = url_;
  req.headers = {{"Metadata", "true"}};
  req.deadline = deadline_;
  req.max_body_bytes = 1ull << 20;  // instance documents are a few KiB
  auto resp = http::Get(req);
  if (!resp.ok()) {
    Status s = resp.status();
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) {
      return Status(s.code(), s.message() + " (Azure IMDS answers only on Azure VMs; set " +
                                  kEndpointEnv + " to use another endpoint)");
    }
    if (s.code() == StatusCode::kInvalidArgument) {
      return InvalidArgument(s.message() + " (check " + kEndpointEnv + ")");
    }
    return s;
  }
  if (resp->status != 200) {
    std::string body = resp->body.substr(0, 200);
    return Unavailable("GET " + url_ + ": HTTP " + std::to_string(resp->status) + " " +
                       resp->reason + (body.empty() ? "" : ": " + body));
  }
  return ParseImdsDocument(resp->body, "IMDS response from " + url_);
}

}  // namespace gantry
