// Package malloc bounds glibc's malloc arenas when relay starts.
//
// glibc gives each thread that contends for memory an arena of its own, up
// to eight per core, and a freed block stays in its thread's arena.
// librdkafka's threads (one per broker connection per client, and its
// main threads) each allocate and free fetched and produced records, so
// freed memory spreads over many arenas and the process keeps it: about
// 12 MiB more peak RSS in the bench's mode (b). Two arenas cost no
// measurable throughput there. Set MALLOC_ARENA_MAX to choose otherwise.
// The C constructor below does it; importing this package is what links
// it in.
package malloc

// #include <stdlib.h>
// #ifdef __GLIBC__
// #include <malloc.h>
// #endif
//
// // Limits glibc's malloc to two arenas, unless MALLOC_ARENA_MAX says
// // otherwise (glibc reads it itself). Elsewhere it does nothing. A
// // constructor: it runs when the program is loaded, before any thread.
// __attribute__((constructor)) static void relay_limit_arenas(void) {
// #if defined(__GLIBC__) && defined(M_ARENA_MAX)
//   if (getenv("MALLOC_ARENA_MAX") == NULL) mallopt(M_ARENA_MAX, 2);
// #endif
// }
import "C"
