package main

// #include <stdlib.h>
// #ifdef __GLIBC__
// #include <malloc.h>
// #endif
//
// // Limits glibc's malloc to two arenas, unless MALLOC_ARENA_MAX says
// // otherwise (glibc has read it already). Elsewhere it does nothing.
// static int relay_limit_arenas(void) {
// #if defined(__GLIBC__) && defined(M_ARENA_MAX)
//   if (getenv("MALLOC_ARENA_MAX") != NULL) return 0;
//   return mallopt(M_ARENA_MAX, 2);
// #else
//   return 0;
// #endif
// }
import "C"

// glibc gives each thread that contends for memory an arena of its own, up
// to eight per core, and a freed block stays in its thread's arena.
// librdkafka's threads (one per broker connection per client, and its
// main threads) each allocate and free fetched and produced records, so
// freed memory spreads over many arenas and the process keeps it: about
// 12 MiB more peak RSS in the bench's mode (b). Two arenas cost no
// measurable throughput there. It runs before any client exists; set
// MALLOC_ARENA_MAX to choose otherwise.
func init() { C.relay_limit_arenas() }
