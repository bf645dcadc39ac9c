// Azure Instance Metadata Service (IMDS): what VM this process runs on.
//
// Code that needs VM facts takes a `const Imds&`: production passes AzureImds,
// tests pass FakeImds.
//
//   AzureImds imds;  // honours GANTRY_IMDS_ENDPOINT
//   Result<ImdsInfo> vm = imds.Fetch();
//   std::string size = vm.ok() ? vm->vm_size : "unknown";
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry {

// The compute facts of the instance document (api-version 2021-02-01). Every
// field but vm_size is "" when the document does not carry it.
struct ImdsInfo {
  std::string vm_size;          // compute.vmSize, e.g. "Standard_ND96isr_H100_v5"
  std::string location;         // compute.location, e.g. "eastus"
  std::string vm_id;            // compute.vmId (a GUID)
  std::string name;             // compute.name
  std::string zone;             // compute.zone, "" outside availability zones
  std::string priority;         // compute.priority: "Regular", "Spot" (older: "Low")
  std::string eviction_policy;  // compute.evictionPolicy: "Deallocate", "Delete" (Spot only)
  std::string publisher;        // compute.publisher of the image
  std::string offer;            // compute.offer
  std::string sku;              // compute.sku
  // The network document (network.interface[].ipv4/ipv6.ipAddress[]): true
  // when it was present and well formed. A malformed or absent network part
  // leaves it false (the compute facts above still count) and the lists empty.
  // Azure lists only Basic-SKU public IPs here: an empty list is not proof
  // that no Standard-SKU public IP is attached.
  bool network_known = false;
  std::vector<std::string> public_ips;   // non-empty publicIpAddress values
  std::vector<std::string> private_ips;  // privateIpAddress values

  // True for Spot (and legacy low-priority) VMs, which Azure may evict.
  bool spot() const { return priority == "Spot" || priority == "Low"; }
  // Stable keys, the same names as the compute fields above (the network
  // fields are not part of it).
  Json ToJson() const;
};

// Parses an instance document. `origin` names its source in messages.
// Errors: DataLoss for text that is not JSON, no "compute" object, a missing
// or empty compute.vmSize, or a field that is not a string.
Result<ImdsInfo> ParseImdsDocument(std::string_view text, std::string_view origin);

class Imds {
 public:
  virtual ~Imds() = default;
  // Thread-safe: may be called from any thread, also concurrently.
  virtual Result<ImdsInfo> Fetch() const = 0;
};

// The real service.
class AzureImds : public Imds {
 public:
  static constexpr std::string_view kDefaultEndpoint = "http://169.254.169.254";
  static constexpr std::string_view kInstancePath = "/metadata/instance?api-version=2021-02-01";
  static constexpr std::chrono::milliseconds kDefaultDeadline{2000};

  // Endpoint from the environment variable GANTRY_IMDS_ENDPOINT when it is set
  // and not empty (a base URL such as "http://127.0.0.1:8080"), else
  // kDefaultEndpoint.
  AzureImds();
  // `endpoint` is a base URL; kInstancePath is appended to it.
  explicit AzureImds(std::string endpoint, std::chrono::milliseconds deadline = kDefaultDeadline);

  // GETs endpoint + kInstancePath with "Metadata: true" and one hard deadline.
  // Errors name the URL and add a hint for machines that are not on Azure:
  //   Unavailable / DeadlineExceeded  the endpoint did not answer (not an Azure VM)
  //   Unavailable                     an HTTP status other than 200
  //   DataLoss                        a malformed HTTP response or document
  //   InvalidArgument                 a bad GANTRY_IMDS_ENDPOINT
  Result<ImdsInfo> Fetch() const override;

  const std::string& url() const { return url_; }

 private:
  std::string url_;
  std::chrono::milliseconds deadline_;
};

// Returns a canned ImdsInfo or a canned error (for tests).
class FakeImds : public Imds {
 public:
  explicit FakeImds(ImdsInfo info) : result_(std::move(info)) {}
  // Precondition: !error.ok().
  explicit FakeImds(Status error) : result_(std::move(error)) {}
  Result<ImdsInfo> Fetch() const override { return result_; }

 private:
  Result<ImdsInfo> result_;
};

}  // namespace gantry
