// Test support for the actuator integration tests: a contract server from
// tests/autoscale/*.js run by node on a free loopback port, and the JSON lines
// it records (one per request received).
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"

namespace gantry::autoscale::testing {

inline std::string SourceDir() { return GANTRY_SOURCE_DIR; }
inline std::string NodeBinary() { return FindExecutable("node"); }
// Why the node tests cannot run here, or "" when they can.
inline std::string NodeMissing(const std::string& package) {
  if (NodeBinary().empty()) return "node is not installed";
  if (!std::filesystem::exists(SourceDir() + "/node_modules/" + package)) {
    return "node_modules/" + package + " is missing; run `npm ci` in " + SourceDir();
  }
  return "";
}

class NodeServer {
 public:
  // Starts `node <script> args...` and waits (up to 20 s) for its
  // "listening <port>" line. ok() says whether it came.
  NodeServer(const std::string& script, std::vector<std::string> args) {
    std::vector<std::string> argv = {NodeBinary(), SourceDir() + "/tests/autoscale/" + script};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<SpawnedChild> child = SpawnInGroup(argv[0], argv);
    if (!child.ok()) {
      error_ = child.status().message();
      return;
    }
    child_ = *child;
    std::string out;
    char buf[256];
    for (int i = 0; i < 200 && out.find('\n') == std::string::npos; ++i) {
      pollfd p{child_.out, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::read(child_.out, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    if (out.starts_with("listening ")) {
      port_ = std::stoi(out.substr(10));
    } else {
      error_ = "no 'listening' line from " + script + ": " + out + Stderr();
    }
  }
  ~NodeServer() {
    if (child_.pid > 0) {
      ::kill(-child_.pid, SIGKILL);
      ::waitpid(child_.pid, nullptr, 0);
      ::close(child_.out);
      ::close(child_.err);
    }
  }
  NodeServer(const NodeServer&) = delete;
  NodeServer& operator=(const NodeServer&) = delete;

  bool ok() const { return port_ > 0; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string Stderr() {
    std::string err;
    char buf[4096];
    pollfd p{child_.err, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      ssize_t n = ::read(child_.err, buf, sizeof buf);
      if (n > 0) err.assign(buf, static_cast<size_t>(n));
    }
    return err;
  }

  SpawnedChild child_;
  int port_ = 0;
  std::string error_;
};

// The requests a contract server recorded, in order.
inline std::vector<Json> ReadRecords(const std::string& path) {
  std::vector<Json> out;
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return out;
  size_t start = 0;
  while (start < text->size()) {
    size_t nl = text->find('\n', start);
    if (nl == std::string::npos) nl = text->size();
    std::string line = text->substr(start, nl - start);
    start = nl + 1;
    if (line.empty()) continue;
    Result<Json> j = ParseJson(line, path);
    if (j.ok()) out.push_back(*j);
  }
  return out;
}

// The records of operation `op` ("get_vmss", ...), in order.
inline std::vector<Json> OfOp(const std::vector<Json>& records, const std::string& op) {
  std::vector<Json> out;
  for (const Json& r : records) {
    if (r.value("op", "") == op) out.push_back(r);
  }
  return out;
}

// What must match between two clients' versions of one request: method, path,
// decoded query, the headers that carry meaning (lower-case names; media
// types without parameters) and the JSON body. Keys sorted (nlohmann::json,
// not the ordered Json), so parameter order does not count.
inline nlohmann::json Essence(const Json& record, const std::vector<std::string>& headers) {
  nlohmann::json e = {{"method", nlohmann::json::parse(record["method"].dump())},
                      {"path", nlohmann::json::parse(record["path"].dump())},
                      {"query", nlohmann::json::parse(record["query"].dump())}};
  nlohmann::json h = nlohmann::json::object();
  for (const std::string& name : headers) {
    if (record["headers"].contains(name)) {
      std::string v = record["headers"][name].get<std::string>();
      if (name == "content-type" || name == "accept") v = v.substr(0, v.find(';'));
      h[name] = v;
    }
  }
  e["headers"] = h;
  e["body"] = nlohmann::json::parse(record["body"].dump());
  return e;
}

}  // namespace gantry::autoscale::testing
