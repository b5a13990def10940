/* A stand-in for libnvidia-ml.so.1 (there is no GPU on the test machines): the few NVML calls that
 * `kai resource-reservation` makes, with the devices it shows read from FAKE_NVML_UUIDS (comma-separated
 * UUIDs; empty or unset: no device) and FAKE_NVML_INIT_ERROR (an nvmlReturn_t that nvmlInitWithFlags returns). */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct { int index; } *nvmlDevice_t;
static struct { int index; } devices[16];

static int count_uuids(void) {
    const char *s = getenv("FAKE_NVML_UUIDS");
    if (s == NULL || *s == '\0') return 0;
    int n = 1;
    for (; *s; s++) if (*s == ',') n++;
    return n;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *e = getenv("FAKE_NVML_INIT_ERROR");
    return e ? atoi(e) : 0;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { *count = (unsigned int)count_uuids(); return 0; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if ((int)index >= count_uuids() || index >= 16) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    devices[index].index = (int)index;
    *device = (nvmlDevice_t)&devices[index];
    return 0;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    const char *s = getenv("FAKE_NVML_UUIDS");
    int want = device->index, i = 0;
    while (i < want && s && (s = strchr(s, ','))) { s++; i++; }
    if (s == NULL) return 2;
    size_t n = strcspn(s, ",");
    if (n + 1 > length) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    memcpy(uuid, s, n);
    uuid[n] = '\0';
    return 0;
}
