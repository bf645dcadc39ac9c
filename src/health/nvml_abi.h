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
struct nvmlGpmSampleOpaque;  // nvml.h: typedef struct nvmlGpmSample_st* nvmlGpmSample_t
using nvmlGpmSample_t = nvmlGpmSampleOpaque*;

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
constexpr nvmlReturn_t kErrorArgumentVersionMismatch = 25;
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

// Field ids for nvmlDeviceGetFieldValues (NVML_FI_*). The NVLink throughput
// fields count KiB since driver load; scopeId is the link, UINT_MAX = all links.
constexpr unsigned kFiDevMemoryTemp = 82;
constexpr unsigned kFiDevNvLinkThroughputDataTx = 138;
constexpr unsigned kFiDevNvLinkThroughputDataRx = 139;
constexpr unsigned kScopeAllLinks = 0xFFFFFFFFu;
// nvmlValueType_t.
constexpr int kValueTypeDouble = 0;
constexpr int kValueTypeUnsignedInt = 1;
constexpr int kValueTypeUnsignedLong = 2;
constexpr int kValueTypeUnsignedLongLong = 3;
constexpr int kValueTypeSignedLongLong = 4;
constexpr int kValueTypeSignedInt = 5;
// nvmlGpuVirtualizationMode_t: NONE 0, PASSTHROUGH 1, VGPU 2 (a vGPU guest),
// HOST_VGPU 3, HOST_VSGA 4.
constexpr int kVirtualizationModeVgpu = 2;

// GPM (nvmlGpmMetricId_t); the utilisations are percent 0..100, the PCIe
// rates MiB/s.
constexpr unsigned kGpmMetricGraphicsUtil = 1;
constexpr unsigned kGpmMetricAnyTensorUtil = 5;
constexpr unsigned kGpmMetricDramBwUtil = 10;
constexpr unsigned kGpmMetricPcieTxPerSec = 20;
constexpr unsigned kGpmMetricPcieRxPerSec = 21;
constexpr unsigned kGpmMetricMax = 98;  // NVML_GPM_METRIC_MAX: the size of metrics[]
constexpr unsigned kGpmMetricsGetVersion = 1;
constexpr unsigned kGpmSupportVersion = 1;

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
// nvmlMemory_v2_t; version = NVML_STRUCT_VERSION(Memory, 2) = sizeof | 2 << 24.
struct nvmlMemory_v2_t {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);
union nvmlValue_t {
  double dVal;
  int siVal;
  unsigned uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
};
struct nvmlFieldValue_t {
  unsigned fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
struct nvmlGpmSupport_t {
  unsigned version, isSupportedDevice;
};
struct nvmlGpmMetric_t {
  unsigned metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char *shortName, *longName, *unit;
  } metricInfo;
};
struct nvmlGpmMetricsGet_t {
  unsigned version, numMetrics;
  nvmlGpmSample_t sample1, sample2;
  nvmlGpmMetric_t metrics[kGpmMetricMax];
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned gpuInstanceId, computeInstanceId;
};

static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(sizeof(nvmlGpmMetric_t) == 40);

}  // namespace gantry::health::nvml_abi
