/* gpu_assign.c -- the matching of a node's ranks to its GPUs (dtl_gpu_assign), apart from
 * dtl_cuda_select_device so that it links and is tested without CUDA. */
#include <distal/cuda.h>

/* Is GPU g taken by one of the ranks before r? */
static bool taken(const int *out, int r, int g) {
  for (int q = 0; q < r; q++)
    if (out[q] == g)
      return true;
  return false;
}

int dtl_gpu_assign(int nranks, int ngpus, const unsigned char *near, int *out) {
  if (ngpus < 1 || nranks < 0 || nranks > ngpus)
    return 1;
  for (int r = 0; r < nranks; r++) {
    /* first pass: free GPUs near the rank's cores; second: any free GPU (one exists, since
     * there are at least as many GPUs as ranks) */
    out[r] = -1;
    for (int pass = 0; pass < 2 && out[r] < 0; pass++)
      for (int g = 0; g < ngpus && out[r] < 0; g++) {
        bool close = near && near[(size_t)r * (size_t)ngpus + (size_t)g];
        if ((pass == 1 || close) && !taken(out, r, g))
          out[r] = g;
      }
  }
  return 0;
}
