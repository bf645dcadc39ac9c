// The part of NVML's C ABI (nvml.h of drivers 450 and later) that Gantry calls:
// handle and struct layouts, return codes and enum values. Declared once for the
// loader (nvml.cc, which dlopens libnvidia-ml.so.1) and for the fake library
// (fake_nvml/fake_nvml.cc), so the fake cannot drift from what the loader reads.
// Private to src/health; the names follow nvml.h so they can be checked against it.
#pragma once

namespace gantry::health::nvml_abi {

using nvmlReturn_t = int;
struct nvmlDeviceOpaque;
using nvmlDevice_t = nvmlDeviceOpaque*;
struct nvmlEventSetOpaque;
using nvmlEventSet_t = nvmlEventSetOpaque*;

// nvmlReturn_t values.
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kErrorUninitialized = 1;
constexpr nvmlReturn_t kErrorInvalidArgument = 2;
constexpr nvmlReturn_t kErrorNotSupported = 3;
constexpr nvmlReturn_t kErrorNoPermission = 4;
constexpr nvmlReturn_t kErrorInsufficientSize = 7;
constexpr nvmlReturn_t kErrorTimeout = 10;
constexpr nvmlReturn_t kErrorLibraryNotFound = 12;
constexpr nvmlReturn_t kErrorFunctionNotFound = 13;
constexpr nvmlReturn_t kErrorUnknown = 999;

// nvmlClockType_t, nvmlEccCounterType_t, nvmlMemoryErrorType_t,
// nvmlMemoryLocation_t, nvmlTemperatureSensors_t, event types.
constexpr int kClockGraphics = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;
constexpr int kMemoryErrorCorrected = 0;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kVolatileEcc = 0;
constexpr int kAggregateEcc = 1;
constexpr int kMemoryLocationDram = 2;
constexpr int kMemoryLocationSram = 7;
constexpr int kTemperatureGpu = 0;
constexpr unsigned kNvLinkMaxLinks = 18;
constexpr unsigned long long kEventTypeXidCriticalError = 0x8;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlUtilization_t {
  unsigned gpu, memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned gpuInstanceId, computeInstanceId;
};

}  // namespace gantry::health::nvml_abi
