/* distal/grid.h -- the grid params of a machine, solved from a rank count.
 *
 * Plain C without MPI, so that the runtime (plan_create of generated code) and the compiler
 * (distalc --emit plan --ranks P) call the same function and the grid distalc plans for is
 * the grid the executable forms.  distal/runtime.h includes this header. */
#ifndef DISTAL_GRID_H
#define DISTAL_GRID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DTL_MAX_DIMS 8 /* tensor order and grid dimensions, at most */

/* Solve the grid params from the rank count (LANGUAGE.md section 3, machine).
 * The grid has ndims dims; dim d is the literal lit[d] when param[d] < 0, else the param
 * param[d], whose value values[param[d]] is known (> 0) or unknown (-1).  Unknown params
 * are chosen so that the product of all dims equals nranks.  With rest = nranks / (the
 * product of the known dims), taking the unknown params in order of first use:
 *   - a single unknown param used m times must come out as an exact m-th root of rest;
 *   - otherwise each param used several times (m) takes the largest value v with v^m
 *     dividing rest, and rest /= v^m;
 *   - the s params used once share what is left as balanced factors: the prime factors of
 *     rest, largest first, each multiplies the smallest of the s factors so far; the factors
 *     sorted non-increasing go to the params in order of first use.  This is the algorithm
 *     of Open MPI's MPI_Dims_create (not always the most even split: 72 over two dims is
 *     12 x 6, not 9 x 8), and no MPI call, so distalc computes what the executable will.
 * Returns 0 and fills values, or nonzero with a message in err ("6 ranks cannot form
 * grid(q, q, q): 6 is not a cube") and values unchanged.  names[] are the param names for
 * messages (NULL: p0, p1, ...). */
int dtl_solve_grid(int64_t nranks, int ndims, const int *param, const int64_t *lit,
                   int64_t *values, const char *const *names, char *err, size_t errlen);

/* Solve a machine of levels: ndims dims of every level, outer level first, of which the last
 * ninner are the inner levels (0: a flat machine, solved by dtl_solve_grid over nranks).  A
 * hierarchical machine runs nodes of per_node ranks: its inner levels are solved over the
 * ranks of one node, level 0 over the nodes (nranks / per_node), each by dtl_solve_grid; the
 * messages say which part failed.  plan_create of generated code calls it with the node
 * size it finds (dtl_node_of), distalc --emit plan with --ranks-per-node or its default. */
int dtl_solve_machine(int64_t nranks, int64_t per_node, int ndims, int ninner, const int *param,
                      const int64_t *lit, int64_t *values, const char *const *names, char *err,
                      size_t errlen);

/* The shapes distalc --auto chooses among where a flat machine's grid params are free
 * (README, "Choices"): every assignment of values to the unknown params used once whose
 * product is what dtl_solve_grid gives them together (the params used several times and the
 * known dims as it solves them).  values: nvalues params, unknown ones -1, not changed; out:
 * room for max shapes of nvalues each, shape 0 the solution of dtl_solve_grid, then the
 * others with the first such param's value smallest first (then the next param's, ...),
 * at most max in all.  Returns the count: 0 where the ranks do not form the grid, 1 where
 * fewer than two unknown params are used once (the grid has one shape). */
/* --auto's choice of shape (distalc and plan_create): another shape replaces the solver's
 * (shape 0) only where predicted faster than this fraction of its time. */
#define DTL_SHAPE_MARGIN 0.99
int dtl_grid_shapes(int64_t nranks, int ndims, const int *param, const int64_t *lit, const int64_t *values, int nvalues,
                    int64_t *out, int max);

/* Whether the ranks along the grid dims of mask through the rank at coords (a broadcast's or
 * a reduction's group) are all on one node, where ranks fill nodes in consecutive blocks of
 * per_node (grid coordinates row-major, the last dim fastest: the order of MPI_Cart_create and
 * of a hierarchical machine's node-ordered ranks).  per_node <= 0: one node holds every rank.
 * mask 0: the whole grid (a point-to-point pattern may reach any rank). */
int dtl_group_in_node(int64_t per_node, int ndims, const int64_t *dims, const int64_t *coords, unsigned mask);

#ifdef __cplusplus
}
#endif

#endif
