/* bind.c -- placing ranks and their threads on cores with hwloc: the ranks of a node share
 * its cores evenly (whole NUMA domains first when there are enough), so that OpenBLAS and
 * OpenMP threads of one rank stay on that rank's cores and memory. */
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distal/runtime.h"

int dtl_bind(dtl_ctx *ctx, bool verbose, FILE *out) {
  const char *mode = getenv("DISTAL_BIND");
  if (!mode || !*mode) mode = "core";
  char msg[512] = "";
  int local = 0, per_node = 1, err = 0;
  /* the real node (ranks that share memory), whatever DISTAL_RANKS_PER_NODE simulates */
  MPI_Comm nc;
  if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &nc) == MPI_SUCCESS) {
    MPI_Comm_rank(nc, &local);
    MPI_Comm_size(nc, &per_node);
    MPI_Comm_free(&nc);
  }
  if (!strcmp(mode, "none"))
    snprintf(msg, sizeof msg, "not bound (DISTAL_BIND=none)");
  else if (strcmp(mode, "core") && strcmp(mode, "numa"))
    snprintf(msg, sizeof msg, "not bound: DISTAL_BIND must be core, numa or none, not '%s'", mode);
  else {
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
      snprintf(msg, sizeof msg, "not bound: hwloc cannot read the topology");
    } else {
      int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
      int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
      if (ncores <= 0 || per_node > ncores) {
        snprintf(msg, sizeof msg, "not bound: %d ranks share %d cores on this node", per_node, ncores);
      } else {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        if (!strcmp(mode, "numa") && nnuma >= per_node) {
          /* whole NUMA domains per rank */
          for (int i = local * nnuma / per_node; i < (local + 1) * nnuma / per_node; i++)
            hwloc_bitmap_or(set, set, hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i)->cpuset);
        } else {
          /* an even share of the cores, contiguous in the topology (so within a NUMA domain
           * where the share fits in one) */
          for (int i = local * ncores / per_node; i < (local + 1) * ncores / per_node; i++)
            hwloc_bitmap_or(set, set, hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, i)->cpuset);
        }
        if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0) {
          snprintf(msg, sizeof msg, "not bound: hwloc_set_cpubind failed");
        } else {
          char *s = NULL;
          hwloc_bitmap_list_asprintf(&s, set);
          snprintf(msg, sizeof msg, "bound to cpus %s (%d of %d cores, %s)", s ? s : "?",
                   hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE), ncores, mode);
          free(s);
        }
        hwloc_bitmap_free(set);
      }
      hwloc_topology_destroy(topo);
    }
  }
  if (verbose) {
    /* one line per rank, in rank order, from rank 0 */
    char *all = ctx->rank == 0 ? malloc((size_t)ctx->size * sizeof msg) : NULL;
    MPI_Gather(msg, sizeof msg, MPI_CHAR, all, sizeof msg, MPI_CHAR, 0, ctx->cart);
    if (ctx->rank == 0 && all) {
      for (int r = 0; r < ctx->size; r++) {
        int64_t c[DTL_MAX_DIMS];
        dtl_coords_of(ctx, r, c);
        fprintf(out, "rank %d (", r);
        for (int d = 0; d < ctx->ndims; d++) fprintf(out, "%s%lld", d ? "," : "", (long long)c[d]);
        fprintf(out, "): %s\n", all + (size_t)r * sizeof msg);
      }
    }
    free(all);
  }
  return err;
}
