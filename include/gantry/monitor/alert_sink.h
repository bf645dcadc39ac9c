// Alert notifications to Log Analytics: an alerting::Sink that appends one
// row per alert to a LogsShipper, into the same table as the audit rows
// (shipper.h) with Kind "alert", so one DCR stream and one spool serve both.
//
//   {"TimeGenerated","Computer","Source","AuditLog":"","Kind":"alert","Seq":0,
//    "Prev":"","Hash":"<fingerprint>","RecordId":"<Computer>|<Source>|alert|<fingerprint>|
//    <firing|resolved>|<startsAt>","Line":"<the alert as JSON: status, labels, annotations,
//    startsAt, endsAt, generatorURL, fingerprint, value>"}
//
// In KQL: GantryAudit_CL | where Kind == "alert" | extend A = parse_json(Line).
// Send never blocks on the network (LogsShipper::Append); the Notifier's
// thread calls it.
#pragma once

#include <memory>
#include <string>

#include "gantry/alerting/notify.h"
#include "gantry/monitor/shipper.h"

namespace gantry::monitor {

// `source` names the sender in the rows ("gateway", "agent").
std::unique_ptr<alerting::Sink> NewAlertSink(std::shared_ptr<LogsShipper> shipper,
                                             std::string source);

// The row for one alert (exposed for tests).
std::string AlertRow(const alerting::Alert& alert, std::string_view source,
                     std::string_view computer, int64_t now_ms);

}  // namespace gantry::monitor
