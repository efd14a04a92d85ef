/* gpu_select.c -- choosing this rank's GPU (dtl_cuda_select_device): the ranks of a node are
 * matched to the node's GPUs, each preferring a free GPU attached near the cores it is bound
 * to (PCI locality from hwloc), so that its host-device copies stay on its socket. */
#include <hwloc.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include <distal/cuda.h>

#define BUS_LEN 32 /* a PCI bus id "0000:3b:00.0" and its NUL, with room */

/* Agreement on failure over comm: when any rank failed, every rank gets the message of the
 * lowest failing rank in err and returns 1. */
static int agree(MPI_Comm comm, int bad, char *msg, size_t len, char *err, size_t errlen) {
  int rank, size, first;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = bad ? rank : size;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
    snprintf(err, errlen, "%s", bad ? msg : "MPI_Allreduce failed while agreeing on an error");
    return 1;
  }
  if (first == size)
    return 0;
  msg[len - 1] = '\0';
  MPI_Bcast(msg, (int)len, MPI_CHAR, first, comm);
  snprintf(err, errlen, "%s", msg);
  return 1;
}

/* near[g] = 1 when GPU g hangs off the part of the machine (package, NUMA node) whose cores
 * intersect this process's binding.  Anything unknown counts as not near. */
static void near_row(int ngpus, unsigned char *near) {
  memset(near, 0, (size_t)ngpus);
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0)
    return;
  hwloc_bitmap_t bound = NULL;
  if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) == 0 &&
      hwloc_topology_load(topo) == 0 && (bound = hwloc_bitmap_alloc()) != NULL &&
      hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0) {
    for (int g = 0; g < ngpus; g++) {
      char bus[BUS_LEN] = "";
      if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, g) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topo, bus);
      hwloc_obj_t anc = pci ? hwloc_get_non_io_ancestor_obj(topo, pci) : NULL;
      near[g] = anc && anc->cpuset && hwloc_bitmap_intersects(anc->cpuset, bound);
    }
  }
  hwloc_bitmap_free(bound);
  hwloc_topology_destroy(topo);
}

/* Every rank's choice, printed by rank 0 of comm. */
typedef struct {
  int node, local, gpu;
  char bus[BUS_LEN];
} choice;

static void print_choices(MPI_Comm comm, const choice *mine, FILE *out) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  choice *all = rank == 0 ? malloc((size_t)size * sizeof *all) : NULL;
  int ok = rank != 0 || all != NULL;
  MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
  if (!ok)
    return;
  MPI_Gather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, 0, comm);
  for (int r = 0; rank == 0 && r < size; r++)
    fprintf(out, "rank %d: node %d, local rank %d, GPU %d (%s)\n", r, all[r].node, all[r].local,
            all[r].gpu, all[r].bus);
  free(all);
}

/* Over nc: does any rank of the node pass bad != 0? */
static int node_any(MPI_Comm nc, int bad) {
  int any = bad;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, nc);
  return any;
}

/* The GPU of this rank among the ngpus it sees, given what every rank of its node (nc,
 * ranks in local-rank order) sees.  Every decision is taken from data gathered over the
 * node, so all its ranks take the same branches and their collectives over nc match.
 * Returns nonzero with a message in msg. */
static int choose(MPI_Comm nc, int node, int local, int per_node, int ngpus, int *gpu,
                  char *msg, size_t len) {
  /* the fewest and the most GPUs a rank sees, and the first rank that sees none */
  int v[3] = {ngpus, -ngpus, ngpus == 0 ? local : INT_MAX}, m[3];
  MPI_Allreduce(v, m, 3, MPI_INT, MPI_MIN, nc);
  if (m[2] != INT_MAX) {
    snprintf(msg, len, "node %d: local rank %d sees no GPU", node, m[2]);
    return 1;
  }
  if (m[0] != -m[1]) {
    snprintf(msg, len,
             "node %d: its ranks see different numbers of GPUs (%d to %d); make "
             "CUDA_VISIBLE_DEVICES the same for all, or one GPU per rank",
             node, m[0], -m[1]);
    return 1;
  }
  const int g = ngpus;
  char *ids = calloc((size_t)per_node * (size_t)g, BUS_LEN), *mine = calloc((size_t)g, BUS_LEN);
  unsigned char *near = malloc((size_t)per_node * (size_t)g), *row = malloc((size_t)g);
  int *assign = malloc((size_t)per_node * sizeof *assign), bad = 0;
  if (node_any(nc, !ids || !mine || !near || !row || !assign)) {
    snprintf(msg, len, "node %d: out of memory choosing GPUs", node);
    bad = 1;
    goto done;
  }
  /* every rank's list of bus ids */
  for (int d = 0; d < g; d++)
    if (cudaDeviceGetPCIBusId(mine + (size_t)d * BUS_LEN, BUS_LEN, d) != cudaSuccess) {
      (void)cudaGetLastError();
      snprintf(mine + (size_t)d * BUS_LEN, BUS_LEN, "unknown-%d", d);
    }
  MPI_Allgather(mine, g * BUS_LEN, MPI_CHAR, ids, g * BUS_LEN, MPI_CHAR, nc);
  if (g == 1) {
    /* one visible GPU per rank (as Slurm's --gpus-per-task=1 arranges): it must be a
     * different one for every rank of the node */
    for (int a = 0; a < per_node && !bad; a++)
      for (int b = a + 1; b < per_node && !bad; b++)
        if (!strcmp(ids + (size_t)a * BUS_LEN, ids + (size_t)b * BUS_LEN)) {
          snprintf(msg, len,
                   "node %d: local ranks %d and %d both see only GPU %s; NCCL needs one GPU "
                   "per rank",
                   node, a, b, ids + (size_t)a * BUS_LEN);
          bad = 1;
        }
    *gpu = 0;
    goto done;
  }
  /* several GPUs: all ranks of the node must see the same ones, in the same order */
  for (int r = 1; r < per_node && !bad; r++)
    if (memcmp(ids, ids + (size_t)r * (size_t)g * BUS_LEN, (size_t)g * BUS_LEN) != 0) {
      snprintf(msg, len,
               "node %d: local ranks 0 and %d see different GPUs; make CUDA_VISIBLE_DEVICES "
               "the same for all, or one GPU per rank",
               node, r);
      bad = 1;
    }
  if (!bad && per_node > g) {
    snprintf(msg, len, "node %d has %d ranks but %d GPUs; NCCL needs one GPU per rank", node,
             per_node, g);
    bad = 1;
  }
  if (bad)
    goto done;
  near_row(g, row);
  MPI_Allgather(row, g, MPI_UNSIGNED_CHAR, near, g, MPI_UNSIGNED_CHAR, nc);
  if (dtl_gpu_assign(per_node, g, near, assign) != 0) {
    snprintf(msg, len, "node %d: cannot match %d ranks to %d GPUs", node, per_node, g);
    bad = 1;
  } else {
    *gpu = assign[local];
  }
done:
  free(ids);
  free(mine);
  free(near);
  free(row);
  free(assign);
  return bad;
}

int dtl_cuda_select_device(MPI_Comm comm, bool verbose, FILE *out, char *err, size_t errlen) {
  char msg[512] = "";
  int node = 0, nnodes = 1, local = 0, per_node = 1, rank;
  MPI_Comm_rank(comm, &rank);
  /* GPUs belong to the physical node: the ranks that share memory, whatever
   * DISTAL_RANKS_PER_NODE says about the simulated nodes of a hierarchical machine */
  int bad = 0;
  (void)nnodes;
  MPI_Comm nc = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &nc) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "rank %d: MPI_Comm_split_type failed", rank);
    bad = 1;
  } else {
    MPI_Comm_rank(nc, &local);
    MPI_Comm_size(nc, &per_node);
    node = rank; /* numbered by the lowest rank on it */
    MPI_Allreduce(MPI_IN_PLACE, &node, 1, MPI_INT, MPI_MIN, nc);
  }
  if (agree(comm, bad, msg, sizeof msg, err, errlen)) {
    if (nc != MPI_COMM_NULL)
      MPI_Comm_free(&nc);
    return 1;
  }
  int ngpus = 0, gpu = -1;
  cudaError_t e = cudaGetDeviceCount(&ngpus);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    ngpus = 0; /* choose() fails the whole node */
  }
  bad = choose(nc, node, local, per_node, ngpus, &gpu, msg, sizeof msg);
  MPI_Comm_free(&nc);
  if (e != cudaSuccess) /* say why this rank sees none */
    snprintf(msg, sizeof msg, "rank %d (node %d) sees no GPU: cudaGetDeviceCount: %s", rank, node,
             cudaGetErrorString(e));
  if (!bad && (e = cudaSetDevice(gpu)) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(msg, sizeof msg, "rank %d: cudaSetDevice(%d): %s", rank, gpu, cudaGetErrorString(e));
    bad = 1;
  }
  if (agree(comm, bad, msg, sizeof msg, err, errlen))
    return 1;
  if (verbose) {
    choice c = {.node = node, .local = local, .gpu = gpu, .bus = ""};
    if (cudaDeviceGetPCIBusId(c.bus, (int)sizeof c.bus, gpu) != cudaSuccess) {
      (void)cudaGetLastError();
      snprintf(c.bus, sizeof c.bus, "bus id unknown");
    }
    print_choices(comm, &c, out);
  }
  return 0;
}
