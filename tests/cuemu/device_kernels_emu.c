/* device_kernels_emu.c -- the kernels of libdistal_cuda compiled as C for the host emulation
 * (tests/cuemu): kernel.cuh turns each kernel into a loop and each launch into a call. */
#include "../../src/cuda/device_kernels.cu"
