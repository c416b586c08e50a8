/* moe-bench's SM clock samples (bench_gpu_internal.h): NVML, the driver's
 * libnvidia-ml.so.1, loaded at run time as cuBLAS is, so a machine without
 * it still runs the grid (its points then carry no clock). Why a clock per
 * point: the H200 holds its power cap by lowering the SM clock (NOTES.md
 * v40), so a reader comparing two implementations' times wants the clocks
 * they ran at beside them. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "bench_gpu_internal.h"

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_by_bus_fn)(const char *bus, void **dev);
typedef int (*nvml_clock_fn)(void *dev, int type, unsigned *mhz);

static struct {
    nvml_clock_fn clock;
    void *dev;
} nvml;

int moe_bg_clock_open(char *why, size_t n)
{
    int cdev = 0;
    char bus[32];
    if (nvml.clock) return 0;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return snprintf(why, n, "libnvidia-ml.so.1 not loaded: %s", dlerror()), -1;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_by_bus_fn by_bus = (nvml_by_bus_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_clock_fn clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
    int rc = -1;
    if (!init || !by_bus || !clock)
        snprintf(why, n, "NVML: nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetClockInfo missing");
    else if ((rc = init()) != 0) snprintf(why, n, "nvmlInit_v2: NVML status %d", rc);
    else if (cudaGetDevice(&cdev) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, cdev) != cudaSuccess)
        snprintf(why, n, "cudaDeviceGetPCIBusId failed"), rc = -1, cudaGetLastError();
    else if ((rc = by_bus(bus, &nvml.dev)) != 0)
        snprintf(why, n, "nvmlDeviceGetHandleByPciBusId_v2(%s): NVML status %d", bus, rc);
    if (rc) {
        dlclose(lib);
        return -1;
    }
    nvml.clock = clock; /* the library stays loaded for the run */
    why[0] = 0;
    return 0;
}

unsigned moe_bg_clock_mhz(void)
{
    unsigned mhz = 0;
    enum { NVML_CLOCK_SM = 1 };
    return nvml.clock && nvml.clock(nvml.dev, NVML_CLOCK_SM, &mhz) == 0 ? mhz : 0;
}
