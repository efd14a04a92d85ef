/* fuzz_replay.h -- the replay half of a libFuzzer harness, shared by the fuzz targets of
 * tests/fuzz: with FUZZ_REPLAY a target is built with CC and a main() that runs
 * LLVMFuzzerTestOneInput once on each seed file, so make check replays the corpus even
 * without clang.  Include it after the harness, with FUZZ_REPLAY_NAME set to the program's
 * name (for messages). */
#ifndef DISTAL_FUZZ_REPLAY_H
#define DISTAL_FUZZ_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Run the harness on one file, or on every regular file of a directory; count the inputs. */
static int replay(const char *path, int *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, FUZZ_REPLAY_NAME ": cannot stat %s\n", path);
    return 1;
  }
  if (S_ISDIR(st.st_mode)) {
    DIR *dir = opendir(path);
    if (!dir)
      return 1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(dir));) {
      if (e->d_name[0] == '.')
        continue;
      char *sub = malloc(strlen(path) + strlen(e->d_name) + 2);
      if (!sub)
        return 1;
      sprintf(sub, "%s/%s", path, e->d_name);
      rc |= replay(sub, count);
      free(sub);
    }
    closedir(dir);
    return rc;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, FUZZ_REPLAY_NAME ": cannot read %s\n", path);
    return 1;
  }
  size_t len = (size_t)st.st_size;
  uint8_t *data = malloc(len ? len : 1);
  size_t got = data ? fread(data, 1, len, f) : 0;
  fclose(f);
  if (!data || got != len) {
    free(data);
    fprintf(stderr, FUZZ_REPLAY_NAME ": cannot read %s\n", path);
    return 1;
  }
  LLVMFuzzerTestOneInput(data, len);
  free(data);
  (*count)++;
  return 0;
}

#endif
