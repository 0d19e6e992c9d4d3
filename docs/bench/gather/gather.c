/* gather.c - what copying a large fleet's exposition costs at least on this machine: the
 * bytes of N clusters (one buffer each) copied family by family, cluster by cluster, into
 * 16 KiB frames, as a scrape of /metrics does (src/metrics/stream.rs), the caches cold (64 MiB
 * written between rounds, as the polls between scrapes do). No clock read per frame, no
 * socket: the memory alone. docs/performance.md ("Scraping a large fleet") quotes it.
 * Usage: cc -O2 -o gather docs/bench/gather/gather.c && ./gather [BYTES FAMILIES CLUSTERS]
 *        (default 26423413 bytes, the plain body at N = 1000; 300 families; 1000 clusters) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FRAME (16 * 1024)
#define ROUNDS 21

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 26423413;
  size_t families = argc > 2 ? strtoull(argv[2], NULL, 10) : 300;
  size_t clusters = argc > 3 ? strtoull(argv[3], NULL, 10) : 1000;
  size_t chunk = bytes / clusters / families;
  char **text = malloc(clusters * sizeof *text);
  for (size_t c = 0; c < clusters; c++) {
    text[c] = malloc(chunk * families);
    memset(text[c], 'a' + c % 26, chunk * families);
  }
  size_t evict_bytes = 64u << 20;
  char *evict = malloc(evict_bytes);
  char *frame = malloc(FRAME + chunk);
  double took[ROUNDS];
  unsigned long sum = 0;
  for (int round = 0; round < ROUNDS; round++) {
    memset(evict, round, evict_bytes);
    double started = now_ms();
    size_t filled = 0;
    for (size_t f = 0; f < families; f++) {
      for (size_t c = 0; c < clusters; c++) {
        memcpy(frame + filled, text[c] + f * chunk, chunk);
        filled += chunk;
        if (filled >= FRAME) {
          sum += (unsigned char)frame[filled - 1];
          filled = 0;
        }
      }
    }
    took[round] = now_ms() - started;
  }
  qsort(took, ROUNDS, sizeof *took, by_value);
  printf("%zu bytes in %zu-byte chunks (%zu families x %zu clusters): p50 %.2f ms, min %.2f, max %.2f"
         " over %d rounds (checksum %lu)\n",
         chunk * families * clusters, chunk, families, clusters, took[ROUNDS / 2], took[0],
         took[ROUNDS - 1], ROUNDS, sum);
  return 0;
}
