#include "gantry/monitor/alert_sink.h"

#include <fmt/format.h>
#include <unistd.h>

#include <utility>

#include "gantry/core/json.h"

namespace gantry::monitor {
namespace {

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

class AlertSink : public alerting::Sink {
 public:
  AlertSink(std::shared_ptr<LogsShipper> shipper, std::string source)
      : shipper_(std::move(shipper)),
        source_(std::move(source)),
        computer_(Hostname()),
        name_("azure_monitor") {}
  const std::string& name() const override { return name_; }
  Status Send(const std::vector<alerting::Alert>& alerts, int64_t now_ms) override {
    for (const alerting::Alert& a : alerts) {
      shipper_->Append(AlertRow(a, source_, computer_, now_ms));
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<LogsShipper> shipper_;
  std::string source_, computer_;
  std::string name_;
};

}  // namespace

std::string AlertRow(const alerting::Alert& alert, std::string_view source,
                     std::string_view computer, int64_t now_ms) {
  const std::string fp = alerting::Fingerprint(alert.labels);
  const int64_t starts = alert.starts_at_ms != 0 ? alert.starts_at_ms : now_ms;
  const std::string status = alert.firing ? "firing" : "resolved";
  Json line;
  line["status"] = status;
  line["labels"] = Json::object();
  for (const auto& [k, v] : alert.labels) line["labels"][k] = v;
  line["annotations"] = Json::object();
  for (const auto& [k, v] : alert.annotations) line["annotations"][k] = v;
  line["startsAt"] = alerting::FormatRfc3339(starts);
  line["endsAt"] = alerting::FormatRfc3339(alert.ends_at_ms);
  line["generatorURL"] = alert.generator_url;
  line["fingerprint"] = fp;
  line["value"] = alert.value;
  const auto replace = Json::error_handler_t::replace;
  Json row;
  row["TimeGenerated"] = alerting::FormatRfc3339(now_ms);
  row["Computer"] = computer;
  row["Source"] = source;
  row["AuditLog"] = "";
  row["Kind"] = "alert";
  row["Seq"] = 0;
  row["Prev"] = "";
  row["Hash"] = fp;
  row["RecordId"] = fmt::format("{}|{}|alert|{}|{}|{}", computer, source, fp, status,
                                line["startsAt"].get<std::string>());
  row["Line"] = line.dump(-1, ' ', false, replace);
  return row.dump(-1, ' ', false, replace);
}

std::unique_ptr<alerting::Sink> NewAlertSink(std::shared_ptr<LogsShipper> shipper,
                                             std::string source) {
  return std::make_unique<AlertSink>(std::move(shipper), std::move(source));
}

}  // namespace gantry::monitor
