// Test helpers for the fake NVML (header-only; tests only): healthy
// scenarios to start from, a temp dir that holds the scenario and the call
// log, and the environment the fake reads.
//
//   FakeNvmlEnv env;
//   nlohmann::json s = HealthyNode(8);
//   s["gpus"][3]["remapped_rows"]["pending"] = 1;
//   env.Write(s);
//   auto nvml = Nvml::Load(FakeNvmlPath());
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gantry::health::testing {

// GANTRY_BINARY_DIR is defined for every test by cmake/GantryTesting.cmake.
inline std::string FakeNvmlPath() {
  return std::string(GANTRY_BINARY_DIR) + "/lib/libgantry_fake_nvml.so";
}

// One healthy H100 SXM as on ND H100 v5: 18 NVLinks, PCIe Gen5 x16.
inline nlohmann::json HealthyH100(int i) {
  char bus[32];
  std::snprintf(bus, sizeof(bus), "00000001:%02X:00.0", i);
  nlohmann::json g;
  g["name"] = "NVIDIA H100 80GB HBM3";
  g["uuid"] = "GPU-fake-" + std::to_string(i);
  g["pci_bus_id"] = bus;
  g["persistence"] = 1;
  g["ecc"] = {{"volatile", {{"corrected", 0}, {"uncorrected", 0}}},
              {"aggregate", {{"corrected", 3}, {"uncorrected", 0}}},
              {"sram_corrected", 1},
              {"sram_uncorrected", 0},
              {"dram_corrected", 2},
              {"dram_uncorrected", 0}};
  g["remapped_rows"] = {{"corrected", 0}, {"uncorrected", 0}, {"pending", 0}, {"failure", 0}};
  g["retired_pages_pending"] = 0;
  g["clocks_event_reasons"] = 1;  // idle
  g["nvlink"] = std::vector<int>(18, 1);
  g["pcie"] = {{"gen", 5}, {"max_gen", 5}, {"width", 16}, {"max_width", 16}};
  g["temperature_c"] = 40;
  g["power_mw"] = 120000;
  g["power_limit_mw"] = 700000;
  g["clocks"] = {{"app_graphics", 1755},
                 {"app_memory", 2619},
                 {"max_graphics", 1980},
                 {"max_memory", 2619},
                 {"default_app_graphics", 1755},
                 {"default_app_memory", 2619},
                 {"sm", 1980},
                 {"memory", 2619}};
  g["utilization"] = {{"gpu", 0}, {"memory", 0}};
  g["memory_info"] = {{"total", 85520809984ull}, {"used", 4194304}};
  g["energy_mj"] = 1000000;
  g["pcie_replay"] = 0;
  return g;
}

// HealthyH100 plus what dcgm-exporter's remaining default fields read: memory
// temperature, encoder/decoder utilisation, reserved framebuffer (so the
// nvmlDeviceGetMemoryInfo_v2 path), NVLink throughput and GPM with two
// intervals of metrics (the first with the GPU busy, the second idle).
inline nlohmann::json HopperH100(int i) {
  nlohmann::json g = HealthyH100(i);
  g["memory_temp_c"] = 45 + i;
  g["encoder_util"] = 3;
  g["decoder_util"] = 4;
  g["memory_info"]["reserved"] = 512ull << 20;
  g["nvlink_throughput_kib"] = {{"tx", 1000 + i}, {"rx", 2000}};
  g["virtualization_mode"] = 0;
  g["gpm"] = {{"supported", 1},
              {"metrics",
               {{{"graphics_util", 55.0},
                 {"any_tensor_util", 20.0},
                 {"dram_bw_util", 30.0},
                 {"pcie_tx_mib_s", 100.0},
                 {"pcie_rx_mib_s", 200.0}},
                {{"graphics_util", 0.0},
                 {"any_tensor_util", 0.0},
                 {"dram_bw_util", 0.0},
                 {"pcie_tx_mib_s", 0.5},
                 {"pcie_rx_mib_s", 0.25}}}}};
  return g;
}

inline nlohmann::json HopperNode(int gpus = 8) {
  nlohmann::json s;
  s["driver_version"] = "550.54.15";
  s["gpus"] = nlohmann::json::array();
  for (int i = 0; i < gpus; ++i) s["gpus"].push_back(HopperH100(i));
  return s;
}

inline nlohmann::json HealthyNode(int gpus = 8) {
  nlohmann::json s;
  s["driver_version"] = "550.54.15";
  s["gpus"] = nlohmann::json::array();
  for (int i = 0; i < gpus; ++i) s["gpus"].push_back(HealthyH100(i));
  return s;
}

// A temp dir with scenario.json and calls.jsonl, exported through
// GANTRY_FAKE_NVML_SCENARIO / GANTRY_FAKE_NVML_LOG while it lives.
class FakeNvmlEnv {
 public:
  FakeNvmlEnv() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "gantry-fake-nvml-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
    setenv("GANTRY_FAKE_NVML_SCENARIO", scenario_path().c_str(), 1);
    setenv("GANTRY_FAKE_NVML_LOG", log_path().c_str(), 1);
  }
  ~FakeNvmlEnv() {
    unsetenv("GANTRY_FAKE_NVML_SCENARIO");
    unsetenv("GANTRY_FAKE_NVML_LOG");
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  FakeNvmlEnv(const FakeNvmlEnv&) = delete;
  FakeNvmlEnv& operator=(const FakeNvmlEnv&) = delete;

  const std::string& dir() const { return dir_; }
  std::string scenario_path() const { return dir_ + "/scenario.json"; }
  std::string log_path() const { return dir_ + "/calls.jsonl"; }

  void Write(const nlohmann::json& scenario) const {
    std::ofstream(scenario_path()) << scenario.dump(1);
  }

  // The fake's call log, one object per line.
  std::vector<nlohmann::json> Calls() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_path());
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  // Only the state-changing calls (not nvmlInit_v2 / nvmlShutdown).
  std::vector<nlohmann::json> SetCalls() const {
    std::vector<nlohmann::json> out;
    for (const auto& c : Calls()) {
      std::string name = c.value("call", "");
      if (name != "nvmlInit_v2" && name != "nvmlShutdown") out.push_back(c);
    }
    return out;
  }

 private:
  std::string dir_;
};

}  // namespace gantry::health::testing
