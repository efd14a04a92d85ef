/* files.h -- what the runtime's writers (--save) and distalc's share, without MPI. */
#ifndef DISTAL_FILES_H
#define DISTAL_FILES_H

#include <stdbool.h>
#include <stddef.h>

/* The file that writing `path` must replace when it writes a temporary beside it and renames
 * that over it: path itself, or, where path is a symbolic link (or a chain of them, also one
 * that leads nowhere yet), the file the link leads to, so that the link stays and that file
 * gets the data, as writing through the link in place would.  Into out (n bytes); false where
 * it does not fit or the links loop (more than 40). */
bool dtl_write_target(const char *path, char *out, size_t n);

#endif
