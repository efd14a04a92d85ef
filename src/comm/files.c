/* files.c -- what the runtime's writers and distalc's share (files.h) */
#include "files.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool dtl_write_target(const char *path, char *out, size_t n) {
  size_t len = strlen(path);
  if (len + 1 > n) return false;
  memcpy(out, path, len + 1);
  for (int hop = 0; hop < 40; hop++) {
    struct stat st;
    if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return true;
    char to[4096];
    ssize_t m = readlink(out, to, sizeof to);
    if (m <= 0 || (size_t)m >= sizeof to) return false;
    to[m] = '\0';
    /* an absolute target replaces the path; a relative one lies in the link's folder */
    char *slash = strrchr(out, '/');
    size_t dir = to[0] == '/' || !slash ? 0 : (size_t)(slash - out) + 1;
    if (dir + (size_t)m + 1 > n) return false;
    memcpy(out + dir, to, (size_t)m + 1);
  }
  return false;
}
