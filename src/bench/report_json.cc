// Report <-> nccl-tests JSON (version 3, nccl-tests' src/util.cu). Differences,
// all documented in src/bench/README.md: "env" is always [] (the environment
// can hold secrets), "nccl_version" is 0, and a "gantry" object at the end
// carries what nccl-tests has no key for, so FromJson(ToJson(r)) == r.
// nccl-tests writes booleans as the strings "true"/"false"; so do we, and we
// read both spellings.
#include <cstdio>
#include <exception>
#include <regex>

#include "format.h"
#include "gantry/bench/collectives.h"
#include "gantry/comm/types.h"
#include "gantry/config.h"

namespace gantry::bench {
namespace {

constexpr int kJsonVersion = 3;

std::string BoolString(bool b) { return b ? "true" : "false"; }

bool ReadBool(const Json& j) {
  if (j.is_boolean()) return j.get<bool>();
  return j.is_string() && j.get<std::string>() == "true";
}

Json MeasurementJson(const Measurement& m, bool cputime) {
  Json j = Json::object();
  j[cputime ? "cpu_time" : "time"] = m.time_us;
  j["alg_bw"] = m.algbw_gbs;
  j["bus_bw"] = m.busbw_gbs;
  j["nwrong"] = m.wrong >= 0 ? Json(m.wrong) : Json(nullptr);
  return j;
}

Measurement MeasurementFromJson(const Json& j) {
  Measurement m;
  m.time_us = j.contains("cpu_time") ? j.at("cpu_time").get<double>() : j.at("time").get<double>();
  m.algbw_gbs = j.at("alg_bw").get<double>();
  m.busbw_gbs = j.at("bus_bw").get<double>();
  m.wrong = j.at("nwrong").is_null() ? -1 : static_cast<int64_t>(j.at("nwrong").get<double>());
  return m;
}

// Splits a "# Using devices" line back into nccl-tests' device fields.
Json DeviceJson(const std::string& line) {
  static const std::regex kLine(
      R"(^#\s+Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$)");
  std::smatch m;
  Json j = Json::object();
  if (!std::regex_match(line, m, kLine)) {
    j["device_info"] = line;
    return j;
  }
  j["rank"] = std::stoi(m[1]);
  j["group"] = std::stoi(m[2]);
  j["pid"] = std::stoi(m[3]);
  j["hostname"] = m[4].str();
  j["device"] = std::stoi(m[5]);
  j["device_hex"] = m[6].str();
  j["device_info"] = m[7].str();
  return j;
}

std::string DeviceLineFromJson(const Json& j) {
  if (!j.contains("rank")) return j.at("device_info").get<std::string>();
  std::string description = "[";
  description += j.at("device_hex").get<std::string>();
  description += "] ";
  description += j.at("device_info").get<std::string>();
  return internal::DeviceLine(j.at("rank").get<int>(), j.at("pid").get<int>(),
                              j.at("hostname").get<std::string>(), j.at("device").get<int>(),
                              description);
}

}  // namespace

Json Report::ToJson() const {
  const BenchOptions& o = options;
  Json j = Json::object();
  j["version"] = kJsonVersion;
  j["start_time"] = start_time;
  j["args"] = o.args;
  j["env"] = Json::array();
  j["nccl_version"] = 0;

  Json config = Json::object();
  config["nthreads"] = 1;
  config["ngpus"] = 1;
  config["minimum_bytes"] = o.min_bytes;
  config["maximum_bytes"] = o.max_bytes;
  if (o.step_factor > 1) {
    config["step_factor"] = o.step_factor;
  } else {
    config["step_bytes"] = o.step_bytes;
  }
  config["warmup_iters"] = o.warmup_iters;
  config["iterations"] = o.iters;
  config["aggregated_iterations"] = 1;
  config["validation"] = o.check_iters;
  config["graph"] = 0;
  config["blocking_collectives"] = BoolString(o.blocking != 0);
  config["per_iter_timing"] = BoolString(false);
  config["per_iter_skip"] = 0;
  config["parallel_init"] = BoolString(false);
  Json devices_json = Json::array();
  for (const std::string& line : devices) devices_json.push_back(DeviceJson(line));
  config["devices"] = devices_json;
  j["config"] = config;

  Json results = Json::array();
  for (const Row& row : rows) {
    Json r = Json::object();
    r["size"] = row.size_bytes;
    r["count"] = row.count;
    r["type"] = comm::DataTypeName(row.type);
    r["redop"] = row.op ? std::string(comm::ReduceOpName(*row.op)) : std::string("none");
    char root[16];
    std::snprintf(root, sizeof root, "%6i", row.root);
    r["root"] = root;
    r["out_of_place"] = MeasurementJson(row.out_of_place, o.report_cputime);
    r["in_place"] = MeasurementJson(row.in_place, o.report_cputime);
    r["actual_iterations"] = o.iters;
    r["experiment_name"] = "";
    if (!row.timestamp.empty()) r["timestamp"] = row.timestamp;
    results.push_back(r);
  }
  j["results"] = results;
  j["out_of_bounds"] = {{"count", out_of_bounds}, {"okay", BoolString(out_of_bounds == 0)}};
  j["average_bus_bandwidth"] = {{"bandwidth", avg_busbw_gbs}, {"okay", "unchecked"}};
  j["errors"] = Json::array();
  j["end_time"] = end_time;

  Json types = Json::array();
  for (comm::DataType t : o.types) types.push_back(comm::DataTypeName(t));
  Json ops = Json::array();
  for (comm::ReduceOp op : o.ops) ops.push_back(comm::ReduceOpName(op));
  j["gantry"] = {
      {"version", GANTRY_VERSION},
      {"collective", collective},
      {"backend", backend},
      {"nranks", nranks},
      {"program", o.program},
      {"peak_bus_bandwidth", peak_busbw_gbs},
      {"step_bytes", o.step_bytes},
      {"step_factor", o.step_factor},
      {"run_cycles", o.run_cycles},
      {"average", o.average},
      {"blocking", o.blocking},
      {"root", o.root},
      {"timestamps", o.timestamps},
      {"report_cputime", o.report_cputime},
      {"types", types},
      {"ops", ops},
  };
  return j;
}

Result<Report> Report::FromJson(const Json& j) {
  // nlohmann throws on missing keys and wrong types; turn that into a Status here.
  try {
    if (j.at("version").get<int>() != kJsonVersion) {
      return InvalidArgument("benchmark JSON: version " + j.at("version").dump() +
                             " is not supported (expected " + std::to_string(kJsonVersion) + ")");
    }
    Report r;
    const Json& g = j.at("gantry");
    const Json& config = j.at("config");
    BenchOptions& o = r.options;
    r.collective = g.at("collective").get<std::string>();
    r.backend = g.at("backend").get<std::string>();
    r.nranks = g.at("nranks").get<int>();
    r.peak_busbw_gbs = g.at("peak_bus_bandwidth").get<double>();
    o.program = g.at("program").get<std::string>();
    o.step_bytes = g.at("step_bytes").get<uint64_t>();
    o.step_factor = g.at("step_factor").get<uint64_t>();
    o.run_cycles = g.at("run_cycles").get<int>();
    o.average = g.at("average").get<int>();
    o.blocking = g.at("blocking").get<int>();
    o.root = g.at("root").get<int>();
    o.timestamps = ReadBool(g.at("timestamps"));
    o.report_cputime = ReadBool(g.at("report_cputime"));
    o.types.clear();
    for (const Json& t : g.at("types")) {
      ASSIGN_OR_RETURN(comm::DataType type, comm::ParseDataType(t.get<std::string>()));
      o.types.push_back(type);
    }
    o.ops.clear();
    for (const Json& op : g.at("ops")) {
      ASSIGN_OR_RETURN(comm::ReduceOp parsed, comm::ParseReduceOp(op.get<std::string>()));
      o.ops.push_back(parsed);
    }
    o.args = j.at("args").get<std::vector<std::string>>();
    o.min_bytes = config.at("minimum_bytes").get<uint64_t>();
    o.max_bytes = config.at("maximum_bytes").get<uint64_t>();
    o.warmup_iters = config.at("warmup_iters").get<int>();
    o.iters = config.at("iterations").get<int>();
    o.check_iters = config.at("validation").get<int>();
    for (const Json& d : config.at("devices")) r.devices.push_back(DeviceLineFromJson(d));
    r.start_time = j.at("start_time").get<std::string>();
    r.end_time = j.at("end_time").get<std::string>();

    for (const Json& res : j.at("results")) {
      Row row;
      row.size_bytes = res.at("size").get<uint64_t>();
      row.count = res.at("count").get<uint64_t>();
      ASSIGN_OR_RETURN(row.type, comm::ParseDataType(res.at("type").get<std::string>()));
      std::string redop = res.at("redop").get<std::string>();
      if (redop != "none") {
        ASSIGN_OR_RETURN(comm::ReduceOp op, comm::ParseReduceOp(redop));
        row.op = op;
      }
      row.root = std::stoi(res.at("root").get<std::string>());
      row.out_of_place = MeasurementFromJson(res.at("out_of_place"));
      row.in_place = MeasurementFromJson(res.at("in_place"));
      if (res.contains("timestamp")) row.timestamp = res.at("timestamp").get<std::string>();
      r.rows.push_back(std::move(row));
    }
    r.out_of_bounds = j.at("out_of_bounds").at("count").get<int64_t>();
    r.avg_busbw_gbs = j.at("average_bus_bandwidth").at("bandwidth").get<double>();
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("benchmark JSON: ") + e.what());
  }
}

}  // namespace gantry::bench
